"""No body the door accepts costs more than linear time to parse and check (issue 11.2).

Each shape is one of the costliest per byte that the default limits still accept
(bench/parse.py builds them): timed in CPU seconds, least of three runs (two at the larger size), at a size
and at four times that size. Linear time gives a ratio near 4, quadratic near 16;
the bound leaves room for a loaded machine. (The deep shape's cost per byte still
rises up to ~2 MiB, as the cyclic GC's passes over its containers set in: 512 KiB
to 2 MiB reads about 7.)
"""
from __future__ import annotations

import pytest

from bench.parse import SHAPES, accept, cpu_seconds

SMALL = 512 * 1024
FACTOR = 4
BOUND = 12                      # linear: ~4; quadratic: ~16
FLOOR = 2e-3                    # seconds: below this, a timing is mostly noise


@pytest.mark.parametrize("shape", list(SHAPES))
def test_accepted_shape_takes_linear_time(shape):
    small, large = SHAPES[shape](SMALL), SHAPES[shape](SMALL * FACTOR)
    message = accept(small)                                   # accepted, whole
    assert message.parts and len(message.parts) <= 1_000
    ratio = cpu_seconds(large, 2) / max(cpu_seconds(small), FLOOR)
    assert ratio < BOUND, f"{shape}: {FACTOR}x the bytes took {ratio:.1f}x the time"
