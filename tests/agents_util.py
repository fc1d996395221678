"""Helpers for agent tests: a door on a harness, its trace, its frames, its processes."""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.door.session.trace import read_trace
from murmur_wsgi.uris import STREAM_URI
from tests.conftest import Rpc
from tests.tasks_util import DEADLINE, send_params

REPO = Path(__file__).resolve().parents[1]
UPPER_PY = [sys.executable, str(REPO / "examples" / "harness_upper.py")]
UPPER_SH = ["sh", str(REPO / "examples" / "harness_upper.sh")]
FAULTS = [sys.executable, str(REPO / "tests" / "harness_faults.py")]
# Small limits keep every failure test well under a second; the idle limit stays roomy
# (a loaded machine may take a while to start Python) except where a test waits it out.
FAST = {"idle_timeout_secs": 5, "cancel_grace_secs": 0.3, "max_line_bytes": 1024,
        "max_session_id_bytes": 64}
IDLE = 0.5


def tmp_home(tmp_path, monkeypatch) -> Path:
    """Point $MURMUR_WSGI_HOME under tmp_path: records and traces never reach the real home.

    Each agent test module calls it from its own autouse ``home`` fixture.
    """
    home = tmp_path / "home"
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(home))
    return home


def process_manifest(argv, lifecycle=None, **agent):
    block = dict(FAST, process=list(argv))
    block.update(agent)
    manifest = {"name": "harness-agent", "version": "0.1.0",
                "inference": {"transport": "process"}, "agent": block}
    if lifecycle:
        manifest["lifecycle"] = lifecycle
    return manifest


def harness_rpc(argv, lifecycle=None, **agent) -> Rpc:
    """A traced door serving ``argv`` as its harness (close it with ``rpc.door.close()``)."""
    door = create_app(process_manifest(argv, lifecycle, **agent), listen="127.0.0.1:41873",
                      trace=True)
    return Rpc(door)


def trace_of(door) -> list[dict]:
    """The session's trace as the file holds it once every queued record is written.

    NOTE: a record queued under the store's lock is written just after its release, by
    the thread that queued it; a test that saw the change in the store (not in an
    answer) flushes here rather than race that thread.
    """
    door.session.trace.flush()
    return read_trace(door.session.id)


def records_of(door, event_type: str) -> list[dict]:
    return [r for r in trace_of(door) if r["event_type"] == event_type]


def task_records(door, task_id: str, event_type: str) -> list[dict]:
    """The records of ``event_type`` under the task_start of ``task_id``."""
    starts = [r for r in records_of(door, "task_start") if r["task_id"] == task_id]
    assert len(starts) == 1, starts
    parent = starts[0]["event_id"]
    return [r for r in trace_of(door)
            if r["event_type"] == event_type and r["parent_id"] == parent]


def harness_pid(door, task_id: str) -> int:
    (start,) = task_records(door, task_id, "harness_start")
    return start["pid"]


def assert_gone(door, pid: int) -> int | None:
    """Wait (with a deadline) until harness ``pid`` was reaped; return its return code."""
    gone, returncode = door.session.agent.wait_gone(pid, DEADLINE)
    assert gone, f"harness {pid} still running"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    return returncode


def events_of(door, task_id: str) -> list[dict]:
    """Every held event of a task, parsed (A2A events and murmur frames), oldest first.

    NOTE: reads the ring's slots without its lock, so it also serves as a
    ``wait_until`` predicate, which runs with that lock held.
    """
    ring = door.session.ring
    held = [event for event in list(ring._slots)
            if event is not None and event.task_id == task_id]
    held.sort(key=lambda event: event.id)
    return [json.loads(event.payload) for event in held]


def frames_of(door, task_id: str) -> list[dict]:
    """The murmur frames of a task: each frame's metadata under the stream URI."""
    return [e["message"]["metadata"][STREAM_URI] for e in events_of(door, task_id)
            if "message" in e]


def statuses_of(door, task_id: str) -> list[tuple[str, str | None]]:
    """(state, status text) of every statusUpdate of a task, in order."""
    out = []
    for event in events_of(door, task_id):
        update = event.get("statusUpdate")
        if update is not None:
            message = update["status"].get("message")
            out.append((update["status"]["state"],
                        message["parts"][0]["text"] if message else None))
    return out


def response_of(task: dict) -> str:
    (artifact,) = [a for a in task["artifacts"] if a["artifactId"] == "response"]
    return artifact["parts"][0]["text"]


def status_text(task: dict) -> str | None:
    message = task["status"].get("message")
    return message["parts"][0]["text"] if message else None


def tried(call, caught: type = ValueError, ok: str = "written"):
    """An agent that makes ``call(ctx)`` and answers what came of it: ``ok``, or ``refused:
    <the type of the error it caught>``."""
    def agent(ctx):
        try:
            call(ctx)
        except caught as ex:
            return f"refused: {type(ex).__name__}"
        return ok
    return agent


@contextlib.contextmanager
def one_task(agent, name: str = "t"):
    """``(door, the task one SendMessage "go" to a door of ``agent`` answered)``; the door
    closed after."""
    door = create_app({"name": name, "version": "0.1.0"}, agent=agent)
    try:
        yield door, Rpc(door).result("SendMessage", send_params("go"))["task"]
    finally:
        door.close()
