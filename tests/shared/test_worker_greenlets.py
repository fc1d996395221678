"""The workers' greenlets do not record the stack that spawned them.

gevent records it (and the spawning greenlet) for its debugging tools unless
``track_greenlet_tree`` is off: a walk of the spawner's frames at every spawn, which
both applications' gunicorn worker turns off before it loads the application. Run in
a child process: gevent's config is the process's.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    from gevent import monkey
    monkey.patch_all()

    import json
    import _thread
    import threading

    import gevent

    from murmur_wsgi.serving.worker import DeadlineWorker, untracked_greenlets

    def spawned():
        started = threading.Event()
        seen = {}

        def run():
            seen["stack"] = gevent.getcurrent().spawning_stack is not None
            started.set()
        _thread.start_new_thread(run, ())     # as a hub's run starts its agent
        started.wait(5)
        return seen["stack"]

    before = spawned()
    untracked_greenlets()
    after = spawned()
    print(json.dumps({"before": before, "after": after,
                      "named": "untracked_greenlets" in DeadlineWorker.init_process.__code__.co_names}))
""")


def test_a_worker_spawns_greenlets_without_their_spawning_stack():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"before": True, "after": False, "named": True}
