"""A message's large data part, pretty-printed for its agent, leaves the worker's loop its turns.

Both applications render each data part with the pure-Python indenting encoder
(agents/blocks.py) before the request goes on; under gevent that is the request's own
greenlet, and nothing else of the worker ran meanwhile. Run in a child process patched
as gunicorn's gevent worker is: a greenlet notes the time every 2 ms while a data part of
a million numbers (three 1 MB bodies' worth) is rendered with the hub's budget.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    from gevent import monkey
    monkey.patch_all()

    import json
    import time

    import gevent

    from murmur_wsgi.agents.blocks import pretty_json

    seen = []

    def note():
        while True:
            seen.append(time.monotonic())
            gevent.sleep(0.002)         # wait-ok: the loop's ticker, which the test reads

    noter = gevent.spawn(note)
    while not seen:                     # the noter has begun
        gevent.idle()
    started = time.monotonic()
    text = pretty_json([0] * 1_000_000, 16 * 1024 ** 2)
    ended = time.monotonic()
    noter.kill()
    times = [started] + [t for t in seen if started < t < ended] + [ended]
    print(json.dumps({"took": ended - started, "lines": text.count("\\n"),
                      "longest": max(b - a for a, b in zip(times, times[1:]))}))
""")


# NOTE: before, nothing else ran while the part was rendered: the longest gap was the whole
# rendering (0.4 s here; a hub's other tenants' GetTask waited p99 0.74-0.84 s while one
# client sent messages of a third of it without pause). Now it gives way every 10 ms.
@pytest.mark.timed
def test_rendering_a_large_data_part_gives_the_loop_its_turns():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["lines"] == 1_000_001
    assert seen["took"] > 0.2, seen                 # long enough to have needed turns
    assert seen["longest"] < 0.15, seen
