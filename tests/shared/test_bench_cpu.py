"""``make bench``'s CPU per request: a server's CPU time counts its children's."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.run import tree_cpu

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc here")

BURN = """
import sys, time
while time.process_time() < 0.3:
    pass
print("burnt", flush=True)
sys.stdin.read()
"""


def test_a_childs_cpu_counts_in_its_parents_tree():
    before = tree_cpu(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "burnt\n"       # the child spent 0.3 s of CPU
        spent = tree_cpu(os.getpid()) - before
        assert spent >= 0.25
        assert tree_cpu(child.pid) >= 0.25
    finally:
        child.communicate("", timeout=10)


def test_no_process_no_figure():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=10)
    assert tree_cpu(child.pid) is None
