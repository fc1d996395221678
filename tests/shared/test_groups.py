"""The process groups a worker records, and the master's end of a dead worker's groups."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from murmur_wsgi import groups
from tests.process_util import exits_within

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfd, prctl")
DEADLINE = 10.0


def test_the_master_kills_every_group_a_dead_worker_recorded(tmp_path, monkeypatch):
    where = tmp_path / "groups" / "4242"
    monkeypatch.setenv(groups.GROUPS_ENV, str(where))
    kept = subprocess.Popen(["sleep", "30"], start_new_session=True)
    ended = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        groups.record(kept.pid)
        groups.record(ended.pid)
        groups.forget(ended.pid)                 # the door ended that one itself
        assert os.listdir(where) == [f"{os.getpid()}-{kept.pid}"]
        assert groups.end_recorded(str(where), os.getpid()) == [kept.pid]
        assert kept.wait(DEADLINE) == -signal.SIGKILL
        assert ended.poll() is None              # not recorded: not the master's to end
        assert os.listdir(where) == []
    finally:
        for proc in (kept, ended):
            proc.kill()
            proc.wait(DEADLINE)


def test_a_child_started_from_the_main_thread_dies_with_it(tmp_path):
    # A parent that starts a child as the door does, then is killed outright.
    script = ("import subprocess, sys\n"
              "from murmur_wsgi import groups\n"
              "child = subprocess.Popen(['sleep', '30'], start_new_session=True,\n"
              "                         preexec_fn=groups.child_setup())\n"
              "print(child.pid, flush=True)\n"
              "sys.stdin.read()\n")
    with subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as parent:
        try:
            child = int(parent.stdout.readline())
            parent.kill()
            parent.wait(DEADLINE)
            assert exits_within(child, DEADLINE), "the child outlived its parent"
        finally:
            parent.kill()


def test_no_parent_death_signal_off_the_main_thread():
    got = []
    thread = threading.Thread(target=lambda: got.append(groups.child_setup()))
    thread.start()
    thread.join(DEADLINE)
    assert got == [None]


def test_prune_removes_only_the_folders_of_masters_that_are_gone(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(DEADLINE)
    (tmp_path / str(gone.pid)).mkdir()
    (tmp_path / str(gone.pid) / "1-2").touch()
    (tmp_path / str(os.getpid())).mkdir()
    groups.prune(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == [str(os.getpid())]
