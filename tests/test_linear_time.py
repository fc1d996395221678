"""No body the door accepts costs more than linear time to parse and check (issue 11.2).

Each shape is one of the costliest per byte that the default limits still accept
(bench/parse.py builds them): timed in CPU seconds, least of three runs, at a size
and at eight times that size. Linear time gives a ratio near 8, quadratic near 64;
the bound leaves room for a loaded machine.
"""
from __future__ import annotations

import pytest

from bench.parse import SHAPES, accept, cpu_seconds

SMALL = 256 * 1024
FACTOR = 8
BOUND = 20                      # linear: ~8; quadratic: ~64


@pytest.mark.parametrize("shape", list(SHAPES))
def test_accepted_shape_takes_linear_time(shape):
    small, large = SHAPES[shape](SMALL), SHAPES[shape](SMALL * FACTOR)
    message = accept(large)                                   # accepted, whole
    assert message.parts and len(message.parts) <= 1_000
    ratio = cpu_seconds(large) / max(cpu_seconds(small), 1e-4)
    assert ratio < BOUND, f"{shape}: {FACTOR}x the bytes took {ratio:.1f}x the time"
