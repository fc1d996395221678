"""Under gevent, a background loop's quiet store calls are its own greenlet's: a request's
greenlet meanwhile logs its store failures as ever (WARNING), whichever greenlet left
``retried_quietly`` first. Run in a child process loaded as gunicorn's worker is: the
store's modules imported before the worker patches threading (the master loads them with
hub/gunicorn_conf.py), then patched.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import json
    import threading

    from murmur_wsgi.hub.store.base import retried_quietly, retrying_quietly

    from gevent import monkey
    monkey.patch_all()

    import gevent

    seen = {}
    inside = [threading.Event() for _ in range(2)]
    leave = [threading.Event() for _ in range(2)]

    def loop(i):
        with retried_quietly():
            inside[i].set()
            leave[i].wait(5)
            seen[f"loop {i}"] = retrying_quietly()      # loop 1's: once loop 0 left

    loops = [gevent.spawn(loop, i) for i in range(2)]
    for event in inside:
        event.wait(5)
    seen["request, loops inside"] = retrying_quietly()
    leave[0].set()
    loops[0].join(5)
    leave[1].set()
    loops[1].join(5)
    seen["request, loops gone"] = retrying_quietly()
    print(json.dumps(seen))
""")


def test_a_loops_quiet_retries_are_its_own_greenlets():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {"loop 0": True, "loop 1": True, "request, loops inside": False,
                    "request, loops gone": False}
