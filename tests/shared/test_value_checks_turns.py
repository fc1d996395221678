"""A large request's checks leave the worker's loop its turns.

The checks a SendMessage's body goes through before its agent runs walk the whole value
in the request's own greenlet; under gevent nothing else of the worker ran meanwhile.
Each is run in a child process patched as gunicorn's gevent worker is: a greenlet notes
the time every 2 ms while the check runs on a value of about three 1 MB bodies' worth
(bodies that the default limits accept held the worker 15-100 ms each, on a loaded
2-core machine).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    from gevent import monkey
    monkey.patch_all()

    import gc
    import json
    import sys
    import time

    import gevent

    import murmur_wsgi.agents            # as a worker has it: loaded before its first request
    from murmur_wsgi.agents.blocks import fence
    from murmur_wsgi.wire.depth import nests_deeper
    from murmur_wsgi.wire.json_counts import too_deep

    def chain(levels):
        value = 0
        for _ in range(levels):
            value = [value]
        return value

    seen = []

    def note():
        while True:
            seen.append(time.monotonic())
            gevent.sleep(0.002)         # wait-ok: the loop's ticker, which the test reads

    value = eval(sys.argv[1])
    gc.collect()                        # NOTE: no collection of the value's millions of
    gc.freeze()                         # objects inside the check: the check's gaps alone
    noter = gevent.spawn(note)
    while not seen:                     # the noter has begun
        gevent.idle()
    started = time.monotonic()
    answer = eval(sys.argv[2])
    ended = time.monotonic()
    noter.kill()
    times = [started] + [t for t in seen if started < t < ended] + [ended]
    print(json.dumps({"took": ended - started, "answer": answer,
                      "longest": max(b - a for a, b in zip(times, times[1:]))}))
""")


def checked(value: str, check: str) -> dict:
    """What the child saw: ``check`` run on ``value`` (Python expressions)."""
    done = subprocess.run([sys.executable, "-c", CHILD, value, check], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# NOTE: before, each level was one comprehension: the longest gap was the whole check
# (0.2-0.5 s here). Now a wide level gives way every 10 ms.
@pytest.mark.timed
@pytest.mark.parametrize("value", ["[0] * 3_000_000", "[[]] * 2_000_000",
                                   "[{}] * 2_000_000", "[chain(30)] * 100_000"])
def test_the_nesting_check_of_a_large_value_gives_the_loop_its_turns(value):
    seen = checked(value, "nests_deeper(value, 32)")
    assert seen["answer"] is False
    assert seen["longest"] < 0.1, seen


# NOTE: before, the brackets of a body whose nesting shrinks slowly (chains 31 deep) were
# counted in one pass of C iterators: the longest gap was the whole count (0.1-0.2 s here;
# 44-56 ms for a 1 MB body). Now it gives way between slices of 64 KiB of brackets.
@pytest.mark.timed
def test_the_nesting_check_of_a_large_body_gives_the_loop_its_turns():
    seen = checked('b"[" + b",".join([b"[" * 31 + b"0" + b"]" * 31] * 100_000) + b"]"',
                   "too_deep(value, 64)")
    assert seen["answer"] is False
    # the passes of C code over the body before the count are a third of it
    assert seen["longest"] < max(0.08, seen["took"] / 2), seen


# NOTE: before, the fence around a data part's pretty-printed text was chosen by a regex's
# findall of its backtick runs, one C call over the whole text, 20 ms a MB (0.11 s for the
# 5.4 MB text of a 1 MB body, up to 0.35 s for limits.data_text_bytes). Now a few substring
# searches.
@pytest.mark.timed
def test_fencing_a_large_data_part_gives_the_loop_its_turns():
    seen = checked('"      0,\\n" * 2_000_000', 'len(fence("data", value))')
    assert seen["answer"] == 18_000_012
    assert seen["longest"] < 0.08, seen


@pytest.mark.parametrize("content", ["", "no ticks", "a ` b", "``", "x" * 50 + "`" * 7 + "y",
                                     "`" * 64, "`" * 65 + " " + "`" * 3, "``` `````````` ``"])
def test_a_fence_is_longer_than_every_run_of_backticks_in_it(content):
    from murmur_wsgi.agents.blocks import fence

    longest = max(map(len, re.findall("`+", content)), default=0)
    ticks = "`" * max(3, longest + 1)
    assert fence("data", content) == f"{ticks}data\n{content}\n{ticks}"


def test_the_nesting_check_still_finds_a_deep_value_among_many():
    from murmur_wsgi.wire.depth import nests_deeper
    from murmur_wsgi.wire.json_counts import too_deep

    def chain(levels):
        value = 0
        for _ in range(levels):
            value = [value]
        return value

    assert nests_deeper([chain(32)] * 20_000, 32)
    assert not nests_deeper([chain(31)] * 20_000, 32)
    assert nests_deeper([0] * 20_000 + [{"a": chain(31)}], 32)
    assert not nests_deeper([0] * 20_000 + [{"a": chain(30)}], 32)


@pytest.mark.parametrize("levels", [63, 64, 65])
def test_the_count_of_a_large_body_s_brackets_finds_its_depth(levels):
    from murmur_wsgi.wire.json_counts import too_deep

    chains = b",".join([b"[" * 31 + b"0" + b"]" * 31] * 10_000)
    deepest = b"{\"a\":" * (levels - 1) + b"0" + b"}" * (levels - 1)
    for at in (0, 5_000 * 64, len(chains)):
        body = b"[" + chains[:at] + b"," + deepest + b"," + chains[at:] + b"]"
        assert too_deep(body, 64) is (levels > 64)
