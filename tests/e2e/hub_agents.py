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


def reports(ctx):
    """Report the work as it goes: a progress status, a named artifact and a token per
    step, for the steps the text names (a few milliseconds each)."""
    steps = int(ctx.text.split()[0])
    for n in range(steps):
        ctx.progress(f"step {n}")
        ctx.artifacts.add(f"step-{n}", f"step {n} done")
        ctx.write(f"step {n} ")
        if ctx.wait(0.005):
            raise TaskCanceled(ctx.task_id)
    return "".join(f"step {n} " for n in range(steps))
