"""Under gevent, the hub's locks are never held across a switch of greenlets.

A lock held while its greenlet waits in gevent's loop makes every other greenlet that
wants it wait too (and, gevent's locks being handed over by the loop, wait a turn more).
Run in a child process patched as the worker is: each Condition's ``notify`` and the
timers' first ``after`` (which starts their thread), and a waiter for a store connection
told (``Turns``), switch no greenlet with the lock held, and a timer still fires.
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
    import threading
    import time

    import greenlet
    import redis

    from murmur_wsgi.hub.store.redis_commands import Commands
    from murmur_wsgi.hub.store.redis_feed import EventFeed
    from murmur_wsgi.timers import Timers

    watched = []
    held_switches = []

    def held(lock):
        return getattr(lock, "_block", lock).locked()

    def trace(event, args):
        if event in ("switch", "throw"):
            held_switches.extend(name for name, lock in watched if held(lock))

    greenlet.settrace(trace)
    timers = Timers()
    feed = EventFeed(None, "chan")
    commands = Commands(redis.Redis(port=1))
    watched += [("timers", timers._lock), ("feed", feed._lock), ("commands", commands._lock),
                ("turns", commands._turns._lock)]
    fired = threading.Event()
    timers.after(0.01, fired.set)                     # the first: starts the timers' thread
    for cond in (timers._changed, feed._changed):
        with cond:
            cond.notify_all()
    tries = []                                        # a waiter's: none, then one lent

    def take():
        tries.append(len(tries))
        return "lent" if len(tries) > 1 else None
    waiter = threading.Thread(target=commands._turns.wait, args=(take, 10))
    waiter.start()
    while not tries:
        time.sleep(0.001)                             # wait-ok: its first try, with it
    commands._turns.tell()
    waiter.join(10)
    commands._dropped(commands._free())
    print(json.dumps({"fired": fired.wait(10), "held": held_switches,
                      "tries": len(tries)}))
    timers.close()
""")


def test_no_lock_of_the_hub_is_held_across_a_switch_of_greenlets():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"fired": True, "held": [], "tries": 2}
