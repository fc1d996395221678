"""Agents of tests/hub/test_inline_run.py: each notes the thread each of its runs was on,
and the key its turns were taken under (murmur_wsgi/keyed_turns.py)."""
from __future__ import annotations

import threading

from murmur_wsgi.keyed_turns import STEP_KEY

THREADS: dict[str, int] = {}
KEYS: dict[str, str | None] = {}


def _noted(ctx, name: str) -> str:
    THREADS[f"{name}:{ctx.text}"] = threading.get_ident()
    KEYS[f"{name}:{ctx.text}"] = STEP_KEY.get()
    return f"echo: {ctx.text}"


def says_inline(ctx):
    return _noted(ctx, "inline")


says_inline.inline = True


def says_nothing(ctx):
    return _noted(ctx, "threaded")


def hook_fails(ctx):
    return _noted(ctx, "hook")


def _broken_hook(text):
    raise RuntimeError("the hook is broken")


hook_fails.inline = _broken_hook


def asks_per_text(ctx):
    return _noted(ctx, "per-text")


asks_per_text.inline = lambda text: text != "wait"


def exits(ctx):
    raise SystemExit(3)


exits.inline = True


def writes_on(ctx):
    """Streams text without waiting, without end: only its run's stop ends it."""
    _noted(ctx, "writes")
    while True:
        ctx.write("sixteen chars, 1")


writes_on.inline = True
