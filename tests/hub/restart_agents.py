"""An agent that reports progress, artifacts and tokens before, while and after its
store is away (tests/hub/test_redis_restart_runs.py opens each step)."""
from __future__ import annotations

import threading

STEPS = {name: threading.Event() for name in ("reported", "down", "reported_down", "back")}
RAISED: list = []


def reset() -> None:
    for event in STEPS.values():
        event.clear()
    RAISED.clear()


def _report(ctx, n: int) -> None:
    ctx.progress(f"step {n}")
    ctx.artifacts.add(f"notes-{n}", f"note {n}")
    ctx.write(f"token {n} ")


def reporter(ctx):
    try:
        _report(ctx, 1)
        STEPS["reported"].set()
        STEPS["down"].wait(10)
        _report(ctx, 2)                     # the store is away: nothing raises
        STEPS["reported_down"].set()
        STEPS["back"].wait(10)
        _report(ctx, 3)
    except Exception as ex:                 # noqa: BLE001 - the test asserts none came
        RAISED.append(ex)
        raise
    return "token 1 token 2 token 3 "
