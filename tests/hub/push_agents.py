"""Agents the push tests host (by "tests.hub.push_agents:<name>")."""
from __future__ import annotations


def steps(ctx):
    """Report ``int(text)`` progress statuses, then answer."""
    for i in range(int(ctx.text.strip() or "0")):
        ctx.progress(f"step {i + 1}")
    return "done"


def big(ctx):
    """An answer larger than a notification may carry."""
    return "x" * 70_000
