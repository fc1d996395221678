"""The demo agent (``agent: demo``): echoes its text, or acts on a directive line.

See ``docs/demo-agent.md`` for every directive.
"""
from __future__ import annotations

import logging
import math

from murmur_wsgi.agents.base import TaskCanceled, TaskContext, TaskFailed
from murmur_wsgi.agents.fence import strip_untrusted_fence

logger = logging.getLogger(__name__)

def demo_agent(ctx: TaskContext) -> str:
    """Answer the text it receives; a first line starting with ``/`` is a directive."""
    text = strip_untrusted_fence(ctx.text)
    first, _, rest = text.partition("\n")
    word, _, arg = first.partition(" ")
    arg = arg.strip()
    handler = DIRECTIVES.get(word)
    if handler is None:
        return text
    return handler(ctx, arg, rest, text)


def _sleep(ctx: TaskContext, arg: str, rest: str, text: str) -> str:
    try:
        seconds = float(arg)
    except ValueError:
        raise TaskFailed(f"/sleep takes a number of seconds, not '{arg}'") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise TaskFailed(f"/sleep takes a number of seconds, not '{arg}'")
    elapsed = 0.0
    while elapsed < seconds:
        step = min(1.0, seconds - elapsed)
        if ctx.wait(step):
            raise TaskCanceled(ctx.task_id)
        elapsed += step
        if elapsed < seconds:
            ctx.progress(f"slept {elapsed:g}s of {seconds:g}s")
    return rest


def _ask(ctx: TaskContext, arg: str, rest: str, text: str) -> str:
    return strip_untrusted_fence(ctx.ask(arg or "What should I answer?").text)


def _fail(ctx: TaskContext, arg: str, rest: str, text: str) -> str:
    raise TaskFailed(arg or "the demo agent was asked to fail")


STREAM_BLOCK = 1024          # /stream's chunks joined into one string this often


def _stream(ctx: TaskContext, arg: str, rest: str, text: str) -> str:
    try:
        count = int(arg)
    except ValueError:
        raise TaskFailed(f"/stream takes a number of chunks, not '{arg}'") from None
    # NOTE: the answer is kept as joined blocks, not one string per chunk: a million
    # chunks cost their text, not a million objects.
    blocks, block = [], []
    for i in range(1, max(0, count) + 1):
        chunk = f"chunk {i}"
        ctx.write(chunk, final=i == count)
        block.append(chunk)
        if len(block) == STREAM_BLOCK:
            blocks.append("\n".join(block))
            block = []
    if block:
        blocks.append("\n".join(block))
    return "\n".join(blocks)


def _think(ctx: TaskContext, arg: str, rest: str, text: str) -> str:
    ctx.thinking(arg)
    return arg


def _tool(ctx: TaskContext, arg: str, rest: str, text: str) -> str:
    name = arg or "tool"
    call_id = ctx.tool_call_started(name, {"args": rest})
    ctx.tool_call_progress(call_id, f"{name} is running")
    return f"{name} done"


def _raw(ctx: TaskContext, arg: str, rest: str, text: str) -> str:
    return ctx.text


def _background(ctx: TaskContext, arg: str, rest: str, text: str) -> str:
    work_id = ctx.background(arg)
    return f"started {work_id}: {arg}"


DIRECTIVES = {"/sleep": _sleep, "/ask": _ask, "/fail": _fail, "/stream": _stream,
              "/think": _think, "/tool": _tool, "/raw": _raw, "/background": _background}


# The directives whose run waits (a sleep, a question, a process's start); every other text
# is answered at once, so a held request may run it in its own thread (docs/agents.md).
WAITING = ("/sleep", "/ask", "/background")


def _inline(text: str) -> bool:
    """``demo_agent.inline``: True unless the text names a directive that waits.

    NOTE: named anywhere, not only as the directive: a text that merely mentions
    one runs on its own thread, which is never wrong, only slower.
    """
    for word in WAITING:
        if word in text:
            return False
    return True


demo_agent.inline = _inline
