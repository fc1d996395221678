"""Streams woken together write their last events before any of them tidies its end.

Under gevent a woken stream runs until it blocks: without a turn after its last
event, the server's end of each stream (the response's close, the wait for the
next request on the kept-alive connection) would come before the next stream's
last event, and the last of many streams would hear of the end late. Run in a
child process patched by gevent, as gunicorn's gevent worker is.
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

    import gevent

    from murmur_wsgi.streams.sse import SseBody

    STREAMS = 50
    ended = threading.Event()
    order = []
    waiting = []

    class Waiting(SseBody):
        def first(self):
            return [], False

        def next(self, timeout):
            waiting.append(self)
            ended.wait(timeout)
            return [(None, '{"final":true}')], True

    def serve(n):
        body = Waiting(n, heartbeat_secs=30.0)
        for chunk in body:
            order.append(("event", n))
        order.append(("end", n))

    greenlets = [gevent.spawn(serve, n) for n in range(STREAMS)]
    deadline = time.monotonic() + 10
    while len(waiting) < STREAMS and time.monotonic() < deadline:
        gevent.sleep(0)     # wait-ok: the streams' turn, until every one waits (then woken together)
    ended.set()
    gevent.joinall(greenlets, timeout=10)
    print(json.dumps(order))
""")


def test_every_woken_stream_writes_its_last_event_before_any_ends():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    order = [tuple(step) for step in json.loads(done.stdout)]
    assert sorted(order) == sorted([("event", n) for n in range(50)]
                                   + [("end", n) for n in range(50)])
    kinds = [kind for kind, _ in order]
    assert kinds == ["event"] * 50 + ["end"] * 50
