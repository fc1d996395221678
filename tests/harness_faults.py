"""A harness that misbehaves on purpose: ``python tests/harness_faults.py MODE``.

Each mode is one way a program can break the JSON-lines protocol of
docs/harness.md. A mode that must be running when the test acts writes a
``thinking`` line ``ready`` first, so the test waits on that frame.
"""
import json
import os
import signal
import subprocess
import sys
import time


def send(**message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def ready():
    send(type="thinking", text="ready")


def block():
    """Wait for the door without end (only a signal ends it)."""
    signal.pause() if hasattr(signal, "pause") else sys.stdin.read()


def main(mode):
    task = json.loads(sys.stdin.readline())
    if mode == "echo-task":                       # answer with the task line it got
        send(type="response", text=json.dumps(task))
    elif mode == "malformed":
        sys.stdout.write("this is not json\n")
        sys.stdout.flush()
        block()
    elif mode == "not-object":
        sys.stdout.write("[1, 2]\n")
        sys.stdout.flush()
        block()
    elif mode == "nan":                          # Python's json writes NaN; JSON has none
        sys.stdout.write('{"type": "tool-call-started", "toolName": "x", "input": NaN}\n')
        sys.stdout.flush()
        block()
    elif mode.startswith("nested-"):            # a line nesting N levels, then an answer
        levels = int(mode.split("-")[1]) - 1     # the line's own object is the first
        sys.stdout.write('{"type":"tool-call-started","toolName":"t","input":'
                         + "[" * levels + "]" * levels + "}\n")
        send(type="response", text="done")
    elif mode == "surrogate-bytes":              # not UTF-8: a lone surrogate's bytes
        sys.stdout.buffer.write(b'{"type": "text", "text": "x\xed\xa0\x80y"}\n')
        sys.stdout.flush()
        block()
    elif mode == "bad-field":
        send(type="text", text=42)
        block()
    elif mode == "unknown":
        send(type="telepathy", text="hi")
        block()
    elif mode == "exit3":
        sys.exit(3)
    elif mode == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif mode == "hang":
        block()
    elif mode == "blank-keepalive":             # blank lines for 4 idle limits, then an answer
        for _ in range(8):
            sys.stdout.write("\n")
            sys.stdout.flush()
            time.sleep(0.25)                    # wait-ok: the harness's own pace, not a test's
        send(type="response", text="alive")
    elif mode == "oversized":
        sys.stdout.write(json.dumps({"type": "text", "text": "x" * 5000}) + "\n")
        sys.stdout.flush()
        block()
    elif mode == "stderr-flood":
        chunk = "e" * 65536
        while True:
            sys.stderr.write(chunk)
            sys.stderr.flush()
    elif mode in ("wait", "ignore-term"):
        if mode == "ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        ready()
        block()
    elif mode == "grandchild":                  # a child in its group outlives nothing
        child = subprocess.Popen(["sleep", "30"])
        send(type="thinking", text=f"child {child.pid}")
        block()
    elif mode in ("exit-leaving-child", "respond-exit-leaving-child"):
        child = subprocess.Popen(["sleep", "30"])  # exits; its child keeps stdout open
        send(type="thinking", text=f"child {child.pid}")
        if mode == "respond-exit-leaving-child":
            send(type="response", text="done")
            os._exit(0)
        os._exit(3)
    elif mode == "exit-leaving-setsid-child":
        # Its child leaves the group (setsid), so the group's end does not reach it: it
        # holds the harness's stdout open (the test kills it).
        child = subprocess.Popen(["sleep", "30"], start_new_session=True)
        send(type="thinking", text=f"child {child.pid}")
        os._exit(3)
    elif mode == "exit-leaving-setsid-blank-writer":
        # … whose child, outside the group, writes a blank line on its stdout every 0.2 s.
        child = subprocess.Popen([sys.executable, "-c", "import sys, time\nwhile True:\n"
                                  "    sys.stdout.write('\\n'); sys.stdout.flush()\n"
                                  "    time.sleep(0.2)"],  # wait-ok: the child's pace
                                 start_new_session=True)
        send(type="thinking", text=f"child {child.pid}")
        os._exit(3)
    elif mode == "fail":
        send(type="fail", message="the model\nsaid no")
    elif mode in ("respond-linger", "fail-linger"):
        # Ends its task, then lingers with a child in its group: deaf to stdin's end, so
        # only the door's SIGTERM or SIGKILL ends it.
        child = subprocess.Popen(["sleep", "30"])
        send(type="thinking", text=f"child {child.pid}")
        if mode == "respond-linger":
            send(type="response", text="done")
        else:
            send(type="fail", message="no")
        block()
    elif mode == "respond-then-flood-stderr":
        # Steps on the test's SIGUSR1: writes a line and its response, then 2 MiB on stderr.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        ready()
        signal.sigwait({signal.SIGUSR1})
        send(type="thinking", text="go")
        send(type="response", text="done")
        signal.sigwait({signal.SIGUSR1})
        for _ in range(32):
            os.write(2, b"e" * 65536)
        block()
    elif mode == "close-stdout":               # closes its stdout, then keeps running
        ready()
        os.close(1)
        block()
    elif mode == "ask":
        send(type="ask", text="Which colour?")
        reply = json.loads(sys.stdin.readline())
        send(type="response", text=f"you said {reply['text']}")
    elif mode == "ask-then-exit-behind-lines":
        # Asks, then writes more lines than the door reads ahead while it waits for the
        # reply, and exits without one.
        send(type="ask", text="Which colour?")
        for n in range(40):
            send(type="thinking", text=f"still here {n}")
        os._exit(3)
    elif mode == "long-session":               # an id longer than the test's bound
        send(type="session", id="s" * 100)
        send(type="response", text="done")
    elif mode == "session":                    # announce an id, answer with what it got
        session = task["session"]
        send(type="session", id=session["id"] or f"s-{task['task_id']}")
        send(type="response", text=f"{session['mode']} {session['id']}")
    else:
        send(type="fail", message=f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1])
