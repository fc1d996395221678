"""Agents that look at their context's port (door and hub tests)."""
from __future__ import annotations

SEEN: list = []


def asks(ctx):
    """Ask once; keep the reply (a Reply) and the context; answer the reply's text."""
    SEEN.append(ctx)
    reply = ctx.ask("Which colour?")
    SEEN.append(reply)
    return "you said " + reply.text


def delegates(ctx):
    """Open a delegation (the hub offers none)."""
    return ctx.delegate()
