"""No body the door accepts costs more than linear time to parse and check.

Each shape is one of the costliest per byte that the default limits still accept
(bench/parse.py builds them): timed in CPU seconds at a size and at four times that
size, the two in turns (least of three each, ``bench.parse.least_cpu``), so that a
change of the machine's load weighs on both alike. Linear time gives a ratio near 4,
quadratic near 16. (The deep shape's ratio is ~6: its cost per byte still rises up to
~2 MiB, as the cyclic GC's passes over its containers set in.)

Linear is not enough when the body may be 64 MiB: ``limits.max_json_values``
bounds what the costliest shapes may hold, so the worst body at the limits costs
about a second (it cost ~14 s, 0.23 s per MiB, before that limit). Timed against
plain text parts (a quarter of the size, times four: linear, above), in turns too:
about 6 times their cost; ~65 times before that limit.
"""
from __future__ import annotations

import pytest

from bench.parse import BODY, SHAPES, VALUES, accept, data_deep, least_cpu, text_parts
from murmur_wsgi.wire.json_counts import count_values

SMALL = 256 * 1024               # four times this still holds fewer values than the limit
FACTOR = 4
BOUND = 12                      # linear: ~4; quadratic: ~16
FLOOR = 2e-3                    # seconds: below this, a timing is mostly noise
AT_THE_LIMITS = 16              # the worst accepted body / plain text parts as large (~6)

pytestmark = pytest.mark.timed   # compares timings: run alone


@pytest.mark.parametrize("shape", list(SHAPES))
def test_accepted_shape_takes_linear_time(shape):
    small, large = SHAPES[shape](SMALL), SHAPES[shape](SMALL * FACTOR)
    message = accept(small)                                   # accepted, whole
    assert message.parts and len(message.parts) <= 1_000
    assert count_values(large) < VALUES                       # its cost is the shape's, not a cut
    small_seconds, large_seconds = least_cpu(lambda: accept(small), lambda: accept(large))
    ratio = large_seconds / max(small_seconds, FLOOR)
    assert ratio < BOUND, f"{shape}: {FACTOR}x the bytes took {ratio:.1f}x the time"


def test_the_worst_body_at_the_limits_costs_about_a_second():
    body = data_deep(BODY - 1024)       # the deepest data, as many values as allowed, 64 MiB
    assert BODY - 4096 < len(body) <= BODY
    assert VALUES - 100 < count_values(body) <= VALUES
    plain = text_parts(BODY // 4)
    # NOTE: the worst body once (about 2 s of CPU: the least of two doubled the test), the
    # plain parts (a tenth of that) before and after it, so that the machine's load weighs on
    # both alike; CPU time of this thread, steady within a fifth under load.
    before, worst, after = least_cpu(lambda: accept(plain), lambda: accept(body),
                                     lambda: accept(plain), repeat=1)
    ratio = worst / (4 * max(min(before, after), FLOOR))
    assert ratio < AT_THE_LIMITS, f"{worst:.2f}s, {ratio:.1f} times plain text parts as large"


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "terminated"])
def test_a_body_read_in_small_reads_takes_linear_time(declared):
    """An input may give fewer bytes than asked (a host's wrapper of it): the body was added
    up read by read, copied whole at each, 2 MiB in reads of 256 bytes in 0.5 to 0.9 s of
    CPU (ratio ~16)."""
    from murmur_wsgi.serving.body import read_body
    from tests.pep3333 import Dribble

    def read(size: int):
        data = b"x" * size
        environ = {"CONTENT_LENGTH": str(size)} if declared else {"wsgi.input_terminated": True}
        return lambda: read_body({"wsgi.input": Dribble(data, 256), **environ}, 8 * SMALL)

    small_seconds, large_seconds = least_cpu(read(2 * SMALL), read(2 * SMALL * FACTOR))
    ratio = large_seconds / max(small_seconds, FLOOR)
    assert ratio < BOUND, f"{FACTOR}x the bytes took {ratio:.1f}x the time"
