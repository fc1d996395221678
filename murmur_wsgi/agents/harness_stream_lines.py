"""The harness's lines that stream as the task runs: text, thinking, tool calls, frames.

``text``, ``thinking``, ``tool-call-started``, ``tool-call-progress``, ``quota`` and
``suggested-prompt`` give a harness what ``ctx.write``, ``ctx.thinking``,
``ctx.tool_call_*`` and ``ctx.frame`` give a Python agent (see ``docs/harness.md``). Each
handler takes ``(agent, ctx, proc, msg, line)`` like the others (``harness.py``,
``harness_lines.py``); a line of the wrong shape raises ``HarnessFault``.
"""
from __future__ import annotations

from murmur_wsgi.agents.harness_lines import field
from murmur_wsgi.wire.encode import compact_utf8

SHOWN_TEXT = 200              # a quota line's fields shown in its frame's text, at most


def on_text(agent, ctx, proc, msg, line):
    final = field(msg, "final", bool, "a boolean", line, required=False)
    ctx.write(field(msg, "text", str, "a string", line), final=bool(final))


def on_thinking(agent, ctx, proc, msg, line):
    ctx.thinking(field(msg, "text", str, "a string", line))


def on_tool_started(agent, ctx, proc, msg, line):
    name = field(msg, "toolName", str, "a string", line)
    call_id = field(msg, "toolCallId", str, "a string", line, required=False)
    ctx.tool_call_started(name, msg.get("input"), call_id)


def on_tool_progress(agent, ctx, proc, msg, line):
    ctx.tool_call_progress(field(msg, "toolCallId", str, "a string", line),
                           field(msg, "text", str, "a string", line))


def on_quota(agent, ctx, proc, msg, line):
    fields = {key: value for key, value in msg.items() if key != "type"}
    try:
        shown = compact_utf8(fields)
    except ValueError:
        # NOTE: a number past a double's range (1e999): not JSON, which the frame's
        # own check refuses as any agent's value (the agent's answer is not valid JSON).
        shown = ""
    ctx.frame("quota", "quota: " + shown[:SHOWN_TEXT], fields)


def on_suggested_prompt(agent, ctx, proc, msg, line):
    text = field(msg, "text", str, "a string", line)
    ctx.frame("suggested-prompt", text, {"text": text})


HANDLERS = {"text": on_text, "thinking": on_thinking, "tool-call-started": on_tool_started,
            "tool-call-progress": on_tool_progress, "quota": on_quota,
            "suggested-prompt": on_suggested_prompt}
