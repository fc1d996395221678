"""Agents the hub's tests host (by "tests.hub.agents:<name>")."""
from __future__ import annotations

import itertools
import threading
import time

import redis

from murmur_wsgi.agents.base import TaskCanceled, TaskFailed

GATES: dict[str, threading.Event] = {}
SEEN: list = []
OPENING = threading.Event()     # set while tests/hub/conftest.py's close_hub closes a hub


def gate(name: str) -> threading.Event:
    """The gate ``name``; open already while a hub closes (close_hub): a run that reaches its
    gate only then does not hold the hub's drain for its whole timeout."""
    event = GATES.setdefault(name, threading.Event())
    if OPENING.is_set():
        event.set()
    return event


def echo(ctx):
    """Answer the text; remember the context it got."""
    SEEN.append(ctx)
    return ctx.text


def tokens(ctx):
    """Stream the words of the text; answer them joined (or upper-cased after '!')."""
    words = ctx.text.split()
    shout = words and words[0] == "!"
    words = words[1:] if shout else words
    for i, word in enumerate(words):
        ctx.write(word if i == 0 else " " + word)
    ctx.usage(input_tokens=1500, output_tokens=500, cached_tokens=100, model="gpt-4o")
    answer = " ".join(words)
    return answer.upper() if shout else answer


def held(ctx):
    """Wait until the gate named by the text opens (or the run must stop)."""
    SEEN.append(ctx)
    event = gate(ctx.text.strip())
    while not event.is_set():
        if ctx.wait(0.02):
            raise TaskCanceled(ctx.task_id)
    return "released"


def stubborn(ctx):
    """Ignore cancellation until the gate named by the text opens (``<name>-in`` is set once
    it waits)."""
    gate(ctx.text.strip() + "-in").set()
    gate(ctx.text.strip()).wait(30)
    return "done at last"


def fails(ctx):
    raise TaskFailed("public reason")


def crashes(ctx):
    raise RuntimeError("secret internal detail")


def models(ctx):
    ctx.usage(input_tokens=10, output_tokens=5, model="small")
    ctx.usage(input_tokens=1000, output_tokens=500, model="big")
    ctx.usage(input_tokens=1, output_tokens=1, model="big")
    return "two models"


def history(ctx):
    return " | ".join(f"{t.role}:{t.text}" for t in ctx.history) or "(none)"


def recalls(ctx):
    """Publish a named artifact left without parts and one of text, then answer the
    context's earlier turns as ``history`` does: the answer is listed after both."""
    with ctx.artifacts.stream("scratch"):
        pass
    ctx.artifacts.add("notes", "a note")
    return history(ctx)


def with_data(ctx):
    return {"answer": 42}


def refuse_beta(tenant, agent, text):
    """An admission hook: refuse messages asking for beta."""
    return "beta is closed for this tenant" if "beta" in text else None


def partial(ctx):
    """Stream a first piece, then wait to be canceled (or released by the gate)."""
    ctx.write("partial answer")
    event = gate(ctx.text.strip())
    while not event.is_set():
        if ctx.wait(0.02):
            raise TaskCanceled(ctx.task_id)
    return "partial answer, finished"


def streams_on(ctx):
    """Stream ``first``, wait for the gate the text names, stream `` second``, answer both."""
    ctx.write("first")
    gate(ctx.text.strip()).wait(30)
    ctx.write(" second")
    return "first second"


def many(ctx):
    """Stream 60 tokens over about 0.6 s."""
    for i in range(60):
        ctx.write(f"t{i} ")
        ctx.wait(0.01)
    return "".join(f"t{i} " for i in range(60))


def named(ctx):
    """Publish a whole artifact and a streamed one, then complete with a status message."""
    from murmur_wsgi.agents.base import Completed

    ctx.artifacts.add("notes", "a note")
    with ctx.artifacts.stream("log") as out:
        out.write("line 1")
        out.write("line 2")
    return Completed(text="with artifacts", status_message="all done")


def rejects(ctx):
    from murmur_wsgi.agents.base import TaskRejected

    raise TaskRejected("not for this agent")


def leaves_open(ctx):
    out = ctx.artifacts.stream("draft")
    out.write("half")
    return "returned with draft open"


def flood(ctx):
    """Stream 64 KiB tokens, 100 a second, until the run is cut (a reader that never reads)."""
    chunk = "x" * 65536
    while not ctx.wait(0.01):
        ctx.write(chunk)


def mixed(ctx):
    """By the text: "fail" fails, "hold <gate>" waits for the gate, anything else is echoed."""
    if ctx.text == "fail":
        raise TaskFailed("failed on purpose")
    if ctx.text.startswith("hold "):
        event = gate(ctx.text.split(" ", 1)[1])
        while not event.is_set():
            if ctx.wait(0.02):
                raise TaskCanceled(ctx.task_id)
    return ctx.text


def charged(ctx):
    """Stream ``spent``, report usage, then by the text: "fail" fails; "hold <gate>" waits
    for the gate (or the run's stop); "late <gate>" ignores the stop until the gate opens
    (``<gate>-in`` set once it waits), reports usage again and answers."""
    ctx.write("spent")
    ctx.usage(input_tokens=1500, output_tokens=500, model="gpt-4o")
    verb, _, name = ctx.text.partition(" ")
    if verb == "fail":
        raise TaskFailed("failed after spending")
    if verb == "hold":
        event = gate(name)
        while not event.is_set():
            if ctx.wait(0.02):
                raise TaskCanceled(ctx.task_id)
    if verb == "late":
        gate(name + "-in").set()
        gate(name).wait(30)
        ctx.usage(input_tokens=1500, output_tokens=500, model="gpt-4o")
    return "spent"


def mutates(ctx):
    """Change its input in place: the data values, the message's and its parts' metadata."""
    ctx.data[0]["n"] = float("nan")
    ctx.message.metadata["k"] = 10 ** 400
    for part in ctx.message.parts:
        if part.metadata is not None:
            part.metadata.clear()
    return "changed"


def scripted(ctx):
    """Act out the JSON script the text holds (tests/hub/test_stream_model.py): a list of
    ``[step, …]``: ``write`` a token, ``progress``, ``think``, ``tool`` (a call and its
    progress), ``add`` a whole artifact, ``open``/``chunk``/``close`` a streamed one
    (``chunk`` with ``true``: its last), ``fail``; then answer ``done`` (with a status
    message when the last step is ``status``)."""
    import json

    from murmur_wsgi.agents.base import Completed

    streams = {}
    status = None
    for kind, *args in json.loads(ctx.text):
        if kind == "write":
            ctx.write(args[0])
        elif kind == "progress":
            ctx.progress(args[0])
        elif kind == "think":
            ctx.thinking(args[0])
        elif kind == "tool":
            ctx.tool_call_progress(ctx.tool_call_started(args[0], {"n": 1}), "running")
        elif kind == "add":
            ctx.artifacts.add(args[0], args[1])
        elif kind == "open":
            streams[args[0]] = ctx.artifacts.stream(args[0])
        elif kind == "chunk" and args[0] in streams:
            streams[args[0]].write(args[1], last=args[2])
        elif kind == "close" and args[0] in streams:
            streams[args[0]].close()
        elif kind == "fail":
            raise TaskFailed(args[0])
        elif kind == "status":
            status = args[0]
    return Completed(text="done", status_message=status) if status else "done"


def publishes_then_holds(ctx):
    """Publish the artifact ``notes``, stream ``partial``, then hold as ``stubborn`` does
    (until the gate the text names opens, cancel or not)."""
    ctx.artifacts.add("notes", "kept")
    ctx.write("partial")
    gate(ctx.text.strip() + "-in").set()
    gate(ctx.text.strip()).wait(30)
    return "done at last"


FLOODED: list = []          # (mode, pieces written, stopped) of each ``floods`` run


def floods(ctx):
    """Write ``<mode> <count> <size>`` (``text``, ``progress``, ``chunk``, ``names`` or
    ``models``): ``count`` pieces of ``size`` characters each (``count`` ``<secs>s``: pieces
    for that long, whatever the machine's speed); a piece refused with TaskCanceled is tried
    once more, then the agent gives up. Answer ``flooded``."""
    from murmur_wsgi.agents.base import TaskCanceled as Canceled

    mode, count, size = ctx.text.split()
    piece = "f" * int(size)
    stream = ctx.artifacts.stream("log") if mode == "chunk" else None
    written, refused = 0, 0
    until = time.monotonic() + float(count[:-1]) if count.endswith("s") else None
    for i in itertools.count() if until else range(int(count)):
        if until and time.monotonic() >= until:
            break
        try:
            if mode == "text":
                ctx.write(piece)
            elif mode == "progress":
                ctx.progress(piece)
            elif mode == "chunk":
                stream.write(piece)
            elif mode == "names":
                ctx.artifacts.add(f"a{i}", piece)
            else:
                ctx.usage(input_tokens=1, model=f"{i}{piece}")
            written += 1
        except Canceled:
            refused += 1
            if refused == 2:
                break
    FLOODED.append((mode, written, refused))
    return "flooded"


def reports_then_holds(ctx):
    """Write ``<count> <size>``: ``count`` progress statuses of ``size`` characters (a long
    log, a small task), then hold until canceled."""
    count, size = map(int, ctx.text.split())
    for i in range(count):
        ctx.progress(f"{i:06d}" + "r" * size)
    while not ctx.wait(0.02):
        pass
    raise TaskCanceled(ctx.task_id)


# Terminal output as a coding agent streams it: ANSI colours and lines (escaped in JSON:
# each ESC as \u001b, six characters; each newline as two).
TERMINAL = "\x1b[32m✓\x1b[0m ok\n" * 20_000


def terminal_then_waits(ctx):
    """Stream ``TERMINAL`` in one write, then wait for the gate the text names."""
    ctx.write(TERMINAL)
    event = gate(ctx.text.strip())
    while not event.is_set():
        if ctx.wait(0.02):
            raise TaskCanceled(ctx.task_id)
    return TERMINAL


def gated_reports(ctx):
    """Text ``<gate> <count>``: wait for the gate, write ``count`` progress statuses
    ``p000000``, ``p000001``, … at once, then hold until canceled."""
    name, count = ctx.text.split()
    gate(name).wait(30)
    for i in range(int(count)):
        ctx.progress(f"p{i:06d}")
    while not ctx.wait(0.02):
        pass
    raise TaskCanceled(ctx.task_id)


def writes_then_holds(ctx):
    """Text ``<gate> <word>…``: write each word upper-cased (the first stored at once, the
    others held unstored for ``events.merge_secs``), set ``<gate>-in``, then hold until
    canceled."""
    name, *words = ctx.text.split()
    for word in words:
        ctx.write(word.upper())
    gate(name + "-in").set()
    while not ctx.wait(0.02):
        pass
    raise TaskCanceled(ctx.task_id)


def asks(ctx):
    """Ask for input: on the hub the run fails (a task never waits for input)."""
    return ctx.ask("which one?").text


def ends_when_told(ctx):
    """Complete once the gate the text names opens (``<name>-in`` is set once it waits). Its
    end holds a moment: the run's stop waker, called as the run closes, sets ``<name>-ending``
    and waits (5 s at most) for ``<name>-go``: meanwhile the task has ended and the run,
    ended, is still this replica's."""
    name = ctx.text.strip()

    def ending():
        gate(name + "-ending").set()
        gate(name + "-go").wait(5)

    ctx.on_cancel(ending)
    return stubborn(ctx)


def stalls_its_store(ctx):
    """Text ``<gate> <redis URL> <ms>``: hold until canceled (``<gate>-in`` is set once it
    holds). The cancel's first act, the run's stop waker on the canceling thread, pauses
    every client of that Redis for ``ms`` (``CLIENT PAUSE``): a store that stalls just as a
    CancelTask cuts the run."""
    name, url, ms = ctx.text.split()

    def stall():
        with redis.Redis.from_url(url) as conn:
            conn.client_pause(int(ms))

    ctx.on_cancel(stall)
    gate(name + "-in").set()
    while not ctx.wait(0.02):
        pass
    raise TaskCanceled(ctx.task_id)


def reports_in_steps(ctx):
    """Text ``<gate> <count>…``: for each count, write that many progress statuses (``s<i>
    p<j>``), set ``<gate>-<i>`` and wait for ``<gate>-go-<i>``; then answer ``done``."""
    name, *counts = ctx.text.split()
    for i, count in enumerate(map(int, counts)):
        for j in range(count):
            ctx.progress(f"s{i} p{j}")
        gate(f"{name}-{i}").set()
        gate(f"{name}-go-{i}").wait(30)
    return "done"
