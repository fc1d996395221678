#!/usr/bin/env python3
"""A complete harness for murmur_wsgi's process transport: it upper-cases the text.

Serve it with a manifest like this (see docs/harness.md for the protocol):

    name: upper
    version: 0.1.0
    inference: {transport: process}
    agent: {process: [python, examples/harness_upper.py]}

It reads one ``task`` line from stdin, announces its session, reports a
little of what it does, and answers with the task's text upper-cased. Send
``?`` and it asks what to upper-case first; the ``reply`` is upper-cased.
Only the standard library; every line it writes is one JSON object.
"""
import json
import sys
import uuid

FENCE_OPEN = "<untrusted-content"
FENCE_CLOSE = "</untrusted-content>"


def send(**message):
    """Write one JSON line to the door (stdout is the protocol: log to stderr)."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def receive():
    """Read the door's next line; None when the door closed stdin."""
    line = sys.stdin.readline()
    return json.loads(line) if line else None


def inner_text(text):
    """The text without the untrusted fence the door puts around an untrusted task."""
    lines = text.split("\n")
    if len(lines) >= 2 and lines[0].startswith(FENCE_OPEN) and lines[-1] == FENCE_CLOSE:
        lines = lines[1:-1]
    return "\n".join(lines)


def main():
    task = receive()
    if task is None or task.get("type") != "task":
        send(type="fail", message="expected a task line first")
        return 1
    session = task["session"]
    session_id = session["id"] if session["mode"] == "resume" else f"upper-{uuid.uuid4().hex}"
    send(type="session", id=session_id)
    print(f"harness_upper: task {task['task_id']} in session {session_id}", file=sys.stderr)

    text = inner_text(task["text"])
    if text.strip() == "?":
        send(type="ask", text="What should I upper-case?")
        reply = receive()
        if reply is None or reply.get("type") != "reply":
            return 1
        text = inner_text(reply["text"])

    send(type="thinking", text=f"upper-casing {len(text)} characters")
    send(type="tool-call-started", toolCallId="call_upper", toolName="upper",
         input={"chars": len(text)})
    send(type="tool-call-progress", toolCallId="call_upper", text="done")
    answer = text.upper()
    send(type="text", text=answer, final=True)
    send(type="quota", used=len(text), limit=100000)
    send(type="suggested-prompt", text="Now shout something else")
    send(type="response", text=answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
