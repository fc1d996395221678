"""An agent that runs on past its task's end, counting the agents executing at once."""
from __future__ import annotations

import threading

LOCK = threading.Lock()
RELEASE = threading.Event()
STATE = {"executing": 0, "most": 0, "started": 0}


def reset() -> None:
    RELEASE.clear()
    with LOCK:
        STATE.update(executing=0, most=0, started=0)


def executing() -> int:
    with LOCK:
        return STATE["executing"]


def overdue(ctx):
    """Ignore every stop until RELEASE is set (at most 10 s)."""
    with LOCK:
        STATE["executing"] += 1
        STATE["started"] += 1
        STATE["most"] = max(STATE["most"], STATE["executing"])
    try:
        RELEASE.wait(10)
        return "done at last"
    finally:
        with LOCK:
            STATE["executing"] -= 1
