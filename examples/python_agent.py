"""A Python agent for murmur_wsgi: it counts the words it is sent (see docs/agents.md).

Three ways to serve it:

    # 1. Embedded, no YAML: this file, on Werkzeug's development server.
    python examples/python_agent.py

    # 2. Under gunicorn, through the factory below.
    gunicorn -k gevent -w 1 -b 127.0.0.1:41873 'examples.python_agent:make_app()'

    # 3. From a manifest: agent: "examples.python_agent:agent"
    murmur-wsgi serve --config murmur.yaml

Send it ``?`` and it asks what to count; ``/slow`` counts one word every
0.2 s (cancel it with CancelTask); an empty text fails the task.
"""
from __future__ import annotations

from murmur_wsgi import create_app
from murmur_wsgi.agents import strip_untrusted_fence
from murmur_wsgi.agents.base import TaskCanceled, TaskContext, TaskFailed

MANIFEST = {"name": "word-count", "version": "0.1.0",
            "lifecycle": {"input_timeout_secs": 300}}


def agent(ctx: TaskContext) -> str:
    """Count the words of the task's text; the return value is the task's response."""
    # An untrusted task's text arrives inside the untrusted fence: read what it wraps.
    text = strip_untrusted_fence(ctx.text).strip()
    slow = text.startswith("/slow")
    if slow:
        text = text[len("/slow"):].strip()
    if text == "?":
        # TASK_STATE_INPUT_REQUIRED with a "prompt" artifact until the client replies.
        text = strip_untrusted_fence(ctx.ask("What should I count?").text).strip()
    if not text:
        raise TaskFailed("there is nothing to count")       # TASK_STATE_FAILED, this message

    ctx.thinking(f"counting the words of {len(text)} characters")
    call_id = ctx.tool_call_started("count", {"characters": len(text)})
    words = text.split()
    for number, word in enumerate(words, 1):
        if slow and ctx.wait(0.2):           # True at once when the task is canceled
            raise TaskCanceled(ctx.task_id)
        if number % 100 == 0 or slow:
            ctx.progress(f"counted {number} of {len(words)} words")
    ctx.tool_call_progress(call_id, f"{len(words)} words")
    ctx.artifact("count", str(len(words)), tool_call_id=call_id, is_error=False)
    answer = f"{len(words)} words"
    ctx.write(answer, final=True)
    return answer


def make_app():
    """The door serving ``agent``, built without any YAML."""
    return create_app(MANIFEST, agent=agent)


if __name__ == "__main__":
    from werkzeug.serving import run_simple

    run_simple("127.0.0.1", 41873, make_app(), threaded=True)
