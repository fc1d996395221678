"""A large body's parse off gevent's loop (``murmur_wsgi/off_loop.py``, ``serving/envelope.py``),
in a child process gevent has patched, as gunicorn's worker is."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
from gevent import monkey
monkey.patch_all()
import gc, json, sys
import gevent
from murmur_wsgi.errors import ParseError
from murmur_wsgi.keyed_turns import STEP_KEY
from murmur_wsgi.serving.envelope import parse_json

bad = b'{"a":[' + b'1,' * 80_000 + b']}'          # 160 KB, a comma before the bracket
try:
    parse_json(bad, 64, 1_000_000, doubles=True)
    refused = False
except ParseError:
    refused = True

collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(1))
dense = json.dumps({"a": [0.5] * 300_000}).encode()     # 1.5 MB of numbers

def tenant(key):
    STEP_KEY.set(key)
    for _ in range(6):
        parse_json(dense, 64, 1_000_000)

def garbage():
    while not done:
        for _ in range(2000):
            cycle = []
            cycle.append(cycle)
        gevent.sleep(0.001)          # wait-ok: litter a round at a time, beside the parses

done = False
before = len(collections)
litter = gevent.spawn(garbage)
gevent.joinall([gevent.spawn(tenant, key) for key in ("t1", "t2", "t3")])
during = len(collections) - before
done = True
litter.join()
print(json.dumps({"refused": refused, "collections": during, "enabled": gc.isenabled()}))
"""


def run_child() -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_large_bad_body_is_refused_without_a_traceback_and_the_gc_runs_between_parses():
    """A large body that is not JSON is -32700's ParseError in the caller, and nothing on
    stderr: an exception leaving gevent's threadpool was printed by its hub, eleven lines
    of traceback for each such body any client could send. Two tenants parsing large
    bodies one after another leave the cyclic GC on between parses: paused across their
    overlapping parses, it never ran while they went on."""
    found, stderr = run_child()
    assert found["refused"] is True
    assert "Traceback" not in stderr and "ParseError" not in stderr, stderr
    # 18 parses, the GC on after each: 20 collections (3 when it stayed off across them)
    assert found["collections"] >= 9, found
    assert found["enabled"] is True
