"""Agents the e2e hub replicas host ("tests.e2e.hub_agents:<name>")."""
from __future__ import annotations

import time

from murmur_wsgi.agents.base import TaskCanceled


def ticks(ctx):
    """Stream ``tick <n> <epoch ns>`` every 20 ms for the seconds the text names (or until
    canceled); the stamp lets a subscriber on another replica measure the delay."""
    seconds = float(ctx.text.split()[0])
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        ctx.write(f"tick {n} {time.time_ns()}\n")
        n += 1
        if ctx.wait(0.02):
            raise TaskCanceled(ctx.task_id)
    return f"{n} ticks"
