"""Races and bounds in the door, each interleaving forced: the files plane's generation as a task is evicted, a background command started as the session closes, a harness that ends while its task asks, a stream whose task was evicted before it was built, the open-streams gauge as the after_task watcher starts and ends, the delegations of an ended task.

Interleavings are forced with ``sys.settrace`` (a thread pauses at a named source line,
holding whatever it holds there) and ``threading.Event``; nothing sleeps to wait.
"""
from __future__ import annotations

import dis
import inspect
import os
import signal
import sys
import threading

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.door.planes.files import finished_tasks
from murmur_wsgi.door.tasks import store as store_mod
from tests.agents_util import harness_pid, harness_rpc, tmp_home
from tests.conftest import Rpc, make_door
from tests.tasks_util import DEADLINE, NOW, send_params, wait_state


# --- a thread paused at a source line --------------------------------------------------

def line_of(func, text: str) -> tuple:
    """(code object, line number) of the first line of ``func`` (or a code object)
    containing ``text``."""
    code = getattr(func, "__code__", func)
    lines, first = inspect.getsourcelines(code)
    for offset, line in enumerate(lines):
        if text in line:
            return code, first + offset
    raise AssertionError(f"{text!r} not in {code.co_qualname}")


class Pauses:
    """Pause the traced thread each time it reaches one of ``points``, in order.

    ``reached[i]`` is set when the thread stands at point i (before that line runs);
    ``go[i]`` lets it run on.
    """

    def __init__(self, *points):
        self.points = list(points)
        self.reached = [threading.Event() for _ in points]
        self.go = [threading.Event() for _ in points]
        self.at = 0

    def tracer(self, frame, event, arg):
        if self.at >= len(self.points):
            return None
        code = frame.f_code
        if not any(code is c for c, _ in self.points):
            return None

        def local(frame, event, arg):
            if self.at < len(self.points) and event == "line":
                code_, line = self.points[self.at]
                if frame.f_code is code_ and frame.f_lineno == line:
                    i = self.at
                    self.at += 1
                    self.reached[i].set()
                    assert self.go[i].wait(DEADLINE)
            return local
        return local

    def run(self, target, *args):
        def body():
            sys.settrace(self.tracer)
            try:
                target(*args)
            finally:
                sys.settrace(None)
        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        return thread


# --- 1. the files plane's generation is read from two fields set one after the other ----

def test_generation_never_goes_back_while_a_finished_task_is_evicted():
    """``finished_total`` (X-Murmur-Generation) reads ``_finished_count + evicted``
    without the lock; ``_finish``/``_drop`` change them one after the other, so a reader
    sees the generation go 2 -> 1 -> 2 while one task ends and the oldest is evicted."""
    door = make_door(tasks={"keep_finished": 1})
    rpc = Rpc(door)
    try:
        assert rpc.result("SendMessage", send_params("one"))["task"]["status"]["state"] \
            == "TASK_STATE_COMPLETED"
        assert finished_tasks(door.session) == 1
        pauses = Pauses(line_of(store_mod.TaskStore._finish, "if len(queue) > self._keep"),
                        line_of(store_mod.TaskStore._drop, "task_id = record.id"))
        thread = pauses.run(Rpc(door).call, "SendMessage", send_params("two"))
        seen = []
        for i in range(2):
            assert pauses.reached[i].wait(DEADLINE)
            seen.append(finished_tasks(door.session))
            pauses.go[i].set()
        thread.join(DEADLINE)
        seen.append(finished_tasks(door.session))
        assert seen == sorted(seen), f"the generation went back: {seen}"
    finally:
        door.close()


# --- 2. a background command started after the session closed is never killed ----------

def test_no_background_command_outlives_the_closed_session():
    """``Session.close`` kills the background commands running *then*; an agent still
    running (close does not cancel it) may start one afterwards, which nothing kills."""
    entered, go = threading.Event(), threading.Event()

    def agent(ctx):
        entered.set()
        assert go.wait(DEADLINE)
        return ctx.background("sleep 60")

    manifest = {"name": "bg", "version": "0.1.0", "capabilities": {"shell": {"allow": ["sleep"]}}}
    door = create_app(manifest, agent, listen="127.0.0.1:41873")
    rpc = Rpc(door)
    works = door.session.works
    try:
        task = rpc.result("SendMessage", send_params("go", NOW))["task"]
        assert entered.wait(DEADLINE)
        door.close()
        go.set()
        assert door.session.manager.wait_agent_returned(task["id"], DEADLINE)
        left = works.running()
        assert left == [], f"running after the session closed: {[w.command for w in left]}"
    finally:
        go.set()
        for work in list(works._works):
            try:
                os.killpg(work.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            work.proc.wait()


# --- 3. a harness that dies while its task waits for input wedges the capsule ----------

ASK_THEN_EXIT = [sys.executable, "-c", (
    "import json, sys\n"
    "sys.stdin.readline()\n"
    "sys.stdout.write(json.dumps({'type': 'ask', 'text': 'which?'}) + '\\n')\n"
    "sys.stdout.flush()\n"
    "sys.exit(3)\n")]


@pytest.fixture
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


def test_a_harness_that_exits_while_its_task_asks_fails_the_task(home):
    """docs/harness.md: a harness that "exits before response" fails the task, and
    "nothing a harness does can hang the door". During an ``ask`` the task's thread
    waits on the reply alone (no timeout by default): the exit event waits unread in
    the queue, the task stays INPUT_REQUIRED with no process behind it, and the
    capsule (task_acceptance: single) rejects every new task as busy, for ever."""
    rpc = harness_rpc(ASK_THEN_EXIT)
    door = rpc.door
    try:
        task = rpc.result("SendMessage", send_params("go"))["task"]
        pid = harness_pid(door, task["id"])
        with door.session.agent._cond:
            proc = door.session.agent._live.get(pid)
        if proc is not None:
            assert proc.proc.wait(DEADLINE) == 3      # the harness is gone
        try:
            wait_state(door, task["id"], "TASK_STATE_FAILED", timeout=5.0)
        except AssertionError:
            pass
        state = door.session.store.get(task["id"]).state
        after = rpc.result("SendMessage", send_params("next", NOW))["task"]["status"]
        assert (state, after["state"]) == ("TASK_STATE_FAILED", "TASK_STATE_SUBMITTED"), \
            (state, after)
    finally:
        door.close()


# --- 4. a task's stream whose task is evicted before the stream is built never ends -----

def test_a_task_stream_ends_even_when_its_task_was_evicted_before_the_stream_was_built():
    """``_stream`` finds the followed task again by id (``store.get``) to build its
    ``recover``; if the task ended and was evicted between ``accept`` and that lookup,
    ``recover`` is None for ever: a reader that lost the terminal event (the ring moved
    on) never learns the task ended, and the stream runs on with heartbeats until the
    client leaves."""
    from werkzeug.test import EnvironBuilder
    from murmur_wsgi.door.methods import streams as streams_mod
    import json as json_

    door = make_door(tasks={"keep_finished": 1},
                     stream={"replay_events": 2, "reader_queue": 1, "heartbeat_secs": 0.2})
    rpc = Rpc(door)
    try:
        body = json_.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                            "params": send_params("A")})
        environ = EnvironBuilder(method="POST", path="/", data=body,
                                 content_type="application/json",
                                 headers={"A2A-Version": "1.0"}).get_environ()
        answer = {}

        def call():
            answer["body"] = door(environ, lambda status, headers, exc=None: None)

        pauses = Pauses(line_of(streams_mod.send_streaming_message, "if frames_on:"))
        thread = pauses.run(call)
        assert pauses.reached[0].wait(DEADLINE)
        (first,) = [r for r in door.session.store.snapshot()]
        wait_state(door, first.id, "TASK_STATE_COMPLETED")
        assert rpc.result("SendMessage", send_params("B"))["task"]["status"]["state"] \
            == "TASK_STATE_COMPLETED"
        assert door.session.store.get(first.id) is None        # evicted (keep_finished: 1)
        pauses.go[0].set()
        thread.join(DEADLINE)
        chunks = iter(answer["body"])
        seen = [next(chunks)]
        seen.extend(chunk for _, chunk in zip(range(1), chunks))   # at most one more
        answer["body"].close()
        text = b"".join(seen).decode()
        assert "TASK_STATE_COMPLETED" in text and ":heartbeat" not in text, text
    finally:
        door.close()


# --- 5. the open-streams gauge counts the after_task watcher while it starts and ends ---

def line_after(func, text: str) -> tuple:
    """(code object, line number) of the first line run after the one ``line_of`` finds."""
    code, line = line_of(func, text)
    return code, min(n for _, n in dis.findlinestarts(code) if n is not None and n > line)


def nested_code(func, name: str):
    """The code object of the function ``name`` defined inside ``func``."""
    (code,) = [c for c in func.__code__.co_consts if inspect.iscode(c) and c.co_name == name]
    return code


def test_the_open_streams_gauge_never_counts_the_after_task_watcher():
    """``murmur_open_streams`` is the ring's readers less one while ``_watching``: the
    watcher opens its reader before it sets the flag and clears the flag before it closes
    its reader, so with no stream open the gauge reads 1 at each of those two moments."""
    from murmur_wsgi.door.session import core

    door = make_door()
    session = door.session
    ended = threading.Event()
    pauses = Pauses(line_after(core.Session.when_first_task_ends, "self.ring.reader("),
                    line_of(nested_code(core.Session.when_first_task_ends, "watch"),
                            "reader.close()"))
    threading.settrace(pauses.tracer)       # the watcher's own thread is traced too
    try:
        thread = pauses.run(session.when_first_task_ends, ended.set)
        seen = []
        assert pauses.reached[0].wait(DEADLINE)        # its reader is open, not yet flagged
        seen.append(session.open_streams())
        pauses.go[0].set()
        thread.join(DEADLINE)
        assert Rpc(door).result("SendMessage", send_params("one"))["task"]["status"][
            "state"] == "TASK_STATE_COMPLETED"
        assert pauses.reached[1].wait(DEADLINE)        # the watcher ends: its reader closes
        seen.append(session.open_streams())
        pauses.go[1].set()
        assert ended.wait(DEADLINE)
        seen.append(session.open_streams())
        assert seen == [0, 0, 0], f"the gauge read {seen} with no stream open"
    finally:
        threading.settrace(None)
        for go in pauses.go:
            go.set()
        door.close()


# --- 6. delegations nobody waits for are dropped only by a later task's delegate() ------

def test_a_tasks_delegations_are_dropped_when_it_ends():
    """``Delegations`` prunes the ended tasks' entries in ``expect()`` only: each
    delegation of a task that ended (and each completion that arrived after its wait gave
    up) stays, with its task's record, until some task delegates again."""
    from tests.door.test_completions import completion_headers

    opened, go = threading.Event(), threading.Event()
    count = 20
    ids = []

    def agent(ctx):
        for _ in range(count):
            ids.append(ctx.delegate())
            assert ctx.wait_completion(ids[-1], timeout=0) is None     # the wait gives up
        opened.set()
        assert go.wait(DEADLINE)
        return "done"

    door = create_app({"name": "parent", "version": "0.1.0"}, agent=agent)
    rpc = Rpc(door)
    delegations = door.session.delegations
    try:
        task = rpc.result("SendMessage", send_params("go", NOW))["task"]
        assert opened.wait(DEADLINE)
        for delegation_id in ids:                   # late: accepted, never read
            rpc.result("SendMessage", send_params("late"), completion_headers(door, delegation_id))
        go.set()
        wait_state(door, task["id"], "TASK_STATE_COMPLETED")
        held = (len(delegations._waiting), len(delegations._arrived))
        assert held == (0, 0), f"(waiting, arrived) after the task ended: {held}"
    finally:
        go.set()
        door.close()
