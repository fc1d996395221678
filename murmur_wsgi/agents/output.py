"""What one task's agent writes, counted against a bound: the door's
``tasks.max_output_bytes`` and the hub's ``limits.max_output_bytes``.

Each counts the same writes: the agent's streamed text, its progress, its frames, its
named artifacts (each chunk) and the name of each model its usage reports. Past the bound
the task ends FAILED with ``passed_text``'s message and its agent is stopped: the call
that passed it, and every later one, raises ``TaskCanceled``. Without it, an agent that
streams without end holds the server's memory until the process dies.
"""
from __future__ import annotations


MAX_OUTPUT_BYTES = 64 * 1024 ** 2       # the default bound, on the door and on the hub
MIN_OUTPUT_BYTES = 64 * 1024            # the least bound either takes: below, ordinary tasks fail
OUTPUT_FLOOR_ERROR = f"must be at least 64Ki ({MIN_OUTPUT_BYTES} bytes)"


def passed_text(who: str, limit: int, setting: str) -> str:
    """The status message of a task whose agent wrote past ``limit`` (``setting``'s)."""
    return f"the {who} wrote more than {limit} bytes ({setting}) and was stopped"


class OutputCount:
    """The bytes one task's agent wrote, against ``limit``; guarded by its task's lock."""

    __slots__ = ("limit", "written")

    def __init__(self, limit: int):
        self.limit = limit
        self.written = 0

    def add(self, size: int) -> bool:
        """Count ``size`` bytes; True while the count is within the limit."""
        self.written += size
        return self.written <= self.limit
