"""What a process holds for answers it has begun to write (traced with tracemalloc)."""
from __future__ import annotations

import tracemalloc


def opened_holding(open_one, count: int) -> tuple[list, list, list, int]:
    """``count`` answers of ``open_one()`` (unbuffered responses), each written its first
    chunk: ``(responses, their chunks' iterators, their first chunks, the bytes the process
    holds more than before)``."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        responses = [open_one() for _ in range(count)]
        chunks = [iter(response.response) for response in responses]
        first = [next(chunk) for chunk in chunks]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return responses, chunks, first, held
