"""The session trace: trace.jsonl's lines, its records, who writes them and when not."""
from __future__ import annotations

import base64
import json
import os
import re
import select
import stat
import threading
import time
from pathlib import Path

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.door.session import records
from murmur_wsgi.door.session.trace import Trace, read_trace, trace_path
from tests.agents_util import records_of, tmp_home, trace_of
from tests.conftest import Rpc
from tests.tasks_util import DEADLINE, NOW, send_params, wait_state

HEAD = ["event_type", "event_id", "parent_id", "session_id", "timestamp"]
EVENT_ID = re.compile(r"^evt_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$")
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 8
AUTHENTICATION = {"scheme": "bearer",
                  "credentials": {"watcher": {"scopes": ["GetTask"]}}}


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


def traced(**manifest):
    base = {"name": "traced", "version": "0.1.0",
            "capabilities": {"shell": {"allow": ["sleep"]}}}
    base.update(manifest)
    return Rpc(create_app(base, listen="127.0.0.1:41873", trace=True))


@pytest.fixture
def rpc():
    rpc = traced()
    yield rpc
    rpc.door.close()


def test_every_line_starts_with_the_five_keys(rpc):
    rpc.result("SendMessage", send_params("hello"))
    lines = Path(trace_path(rpc.door.session.id)).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    session_id = rpc.door.session.id
    for line in lines:
        keys = list(json.loads(line, object_pairs_hook=lambda kv: dict(kv)))
        assert keys[:5] == HEAD, keys
    first, *rest = [json.loads(line) for line in lines]
    assert first["event_type"] == "session_start" and first["parent_id"] is None
    for record in [first] + rest:
        assert EVENT_ID.match(record["event_id"]), record["event_id"]
        assert record["session_id"] == session_id
        assert isinstance(record["timestamp"], int) and record["timestamp"] > 1_600_000_000_000
    assert all(record["parent_id"] is not None for record in rest)


def test_task_start_and_task_end_of_a_completed_task(rpc):
    task = rpc.result("SendMessage", send_params("four", contextId="ctx-t"))["task"]
    session_start, start, end = trace_of(rpc.door)
    assert {k: v for k, v in start.items() if k not in HEAD} == {
        "task_id": task["id"], "context_id": "ctx-t", "source": "a2a", "origin": "event",
        "trust": "untrusted", "message_parts_bytes": 4, "attachments": [],
        "referenced_tasks": []}
    assert start["parent_id"] == session_start["event_id"]
    assert end["event_type"] == "task_end" and end["parent_id"] == start["event_id"]
    assert end["task_id"] == task["id"] and end["exit_status"] == "ok"
    assert isinstance(end["duration_ms"], int) and end["duration_ms"] >= 0


def test_task_start_lists_attachments_and_referenced_tasks(rpc):
    earlier = rpc.result("SendMessage", send_params("one"))["task"]
    parts = [{"text": "look"}, {"raw": base64.b64encode(PNG).decode(), "mediaType": "image/png"}]
    message = {"messageId": "m", "role": "ROLE_USER", "parts": parts,
               "referenceTaskIds": [earlier["id"], "tsk_unknown", earlier["id"]]}
    task = rpc.result("SendMessage", {"message": message})["task"]
    (start,) = [r for r in records_of(rpc.door, "task_start") if r["task_id"] == task["id"]]
    assert start["attachments"] == [{"media_type": "image/png", "bytes": len(PNG)}]
    assert start["referenced_tasks"] == [earlier["id"], "tsk_unknown"]


@pytest.mark.parametrize("text, state, exit_status", [
    ("/fail no", "TASK_STATE_FAILED", "failed"),
    ("/sleep 30", "TASK_STATE_CANCELED", "canceled"),
])
def test_task_end_says_how_the_task_ended(rpc, text, state, exit_status):
    task = rpc.result("SendMessage", send_params(text, NOW))["task"]
    if state == "TASK_STATE_CANCELED":
        wait_state(rpc.door, task["id"], "TASK_STATE_WORKING")
        rpc.result("CancelTask", {"id": task["id"]})
    wait_state(rpc.door, task["id"], state)
    (end,) = records_of(rpc.door, "task_end")
    assert end["task_id"] == task["id"] and end["exit_status"] == exit_status


@pytest.mark.parametrize("params", [
    pytest.param({"message": {"messageId": "m", "role": "ROLE_USER"}}, id="no-parts"),
    pytest.param({"message": {"messageId": "m", "role": "ROLE_USER",
                              "parts": [{"url": "http://x"}]}}, id="url-part"),
])
def test_a_refused_message_writes_nothing(rpc, params):
    assert "error" in rpc.call("SendMessage", params).get_json()
    assert [r["event_type"] for r in trace_of(rpc.door)] == ["session_start"]


def test_a_busy_rejection_writes_no_task_start():
    rpc = traced()
    try:
        running = rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
        rejected = rpc.result("SendMessage", send_params("x"))["task"]
        assert rejected["status"]["state"] == "TASK_STATE_REJECTED"
        starts = [r["task_id"] for r in records_of(rpc.door, "task_start")]
        assert starts == [running["id"]]
        rpc.result("CancelTask", {"id": running["id"]})
    finally:
        rpc.door.close()


def test_the_folder_is_0700_and_the_file_0600(rpc, home):
    rpc.result("SendMessage", send_params("x"))
    path = trace_path(rpc.door.session.id)
    assert path == str(home / "records" / rpc.door.session.id / "trace.jsonl")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    for folder in (os.path.dirname(path), os.path.dirname(os.path.dirname(path))):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700


def test_auth_refusals_are_traced_without_the_token():
    rpc = traced(network={"authentication": AUTHENTICATION})
    try:
        watcher = rpc.door.tokens.tokens["watcher"]
        assert rpc.call("GetTask", {"id": "tsk_x"}).status_code == 401
        assert rpc.call("GetTask", {"id": "tsk_x"},
                        headers={"Authorization": "Bearer not-a-token"}).status_code == 401
        assert rpc.call("ListTasks", {},
                        headers={"Authorization": f"Bearer {watcher}"}).status_code == 403
        refused = [{k: r[k] for k in ("status", "error")}
                   for r in records_of(rpc.door, "auth_refused")]
        assert refused == [{"status": 401, "error": "unauthenticated"},
                           {"status": 401, "error": "invalid_token"},
                           {"status": 403, "error": "insufficient_scope"}]
        text = Path(trace_path(rpc.door.session.id)).read_text(encoding="utf-8")
        for token in rpc.door.tokens.tokens.values():
            assert token not in text
        # A flood of refusals writes at most one record of each kind a second.
        for _ in range(50):
            rpc.call("GetTask", {"id": "tsk_x"})
        assert len(records_of(rpc.door, "auth_refused")) <= 5
        assert "not-a-token" not in text
    finally:
        rpc.door.close()


def test_an_embedded_door_does_not_trace_unless_asked(home, monkeypatch):
    monkeypatch.delenv(records.RECORD_ENV, raising=False)
    door = create_app({"name": "quiet", "version": "1"})
    try:
        Rpc(door).result("SendMessage", send_params("x"))
        assert door.session.trace.enabled is False
        assert not (home / "records").exists()
    finally:
        door.close()


def test_a_served_door_traces_by_default(monkeypatch):
    monkeypatch.setenv(records.RECORD_ENV, str(os.getpid()))
    door = create_app({"name": "served", "version": "1"}, listen="127.0.0.1:41873")
    try:
        Rpc(door).result("SendMessage", send_params("x"))
        assert [r["event_type"] for r in read_trace(door.session.id)] == [
            "session_start", "task_start", "task_end"]
    finally:
        door.close()


def test_a_trace_that_cannot_be_written_turns_off_and_fails_nothing(home):
    home.parent.mkdir(exist_ok=True)
    home.write_text("a file where the home folder should be")
    rpc = traced()
    try:
        task = rpc.result("SendMessage", send_params("still served"))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert rpc.door.session.trace.enabled is False
    finally:
        rpc.door.close()


def test_concurrent_writers_never_interleave_lines():
    trace = Trace("ses_" + "0" * 32, enabled=True)
    barrier = threading.Barrier(8)

    def write(n):
        barrier.wait(5)
        for i in range(50):
            trace.write("probe", trace.session_event, writer=n, i=i, pad="x" * 3000)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()
    lines = read_trace(trace.session_id)
    assert len(lines) == 1 + 8 * 50
    assert sorted((r["writer"], r["i"]) for r in lines[1:]) == [
        (n, i) for n in range(8) for i in range(50)]


def _read_lines(fd, count, deadline):
    """Read ``count`` JSON lines from a pipe, waiting on select up to ``deadline``."""
    data = b""
    while data.count(b"\n") < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"only {data!r} before the deadline"
        if select.select([fd], [], [], remaining)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, "the trace's writer closed early"
            data += chunk
    return [json.loads(line) for line in data.splitlines()]


def test_records_are_written_after_the_store_lock_is_released_and_in_order():
    # The trace file becomes a fifo nobody reads: opening it blocks, like a stalled disk.
    ran = threading.Event()

    def agent(ctx):
        ran.set()
        return "done"

    door = create_app({"name": "traced", "version": "0.1.0"}, agent,
                      listen="127.0.0.1:41873", trace=True)
    rpc = Rpc(door)
    trace = door.session.trace
    trace.close()
    path = trace_path(door.session.id)
    os.unlink(path)
    os.mkfifo(path, 0o600)
    sender = Rpc(door)
    answered = []
    thread = threading.Thread(target=lambda: answered.append(
        sender.result("SendMessage", send_params("go"))))
    thread.start()
    reader = None
    try:
        # task_start is queued and stuck on the disk: the task runs all the same ...
        assert ran.wait(DEADLINE), "the agent did not start while the trace's disk stalled"
        store_lock = door.session.store.lock
        assert store_lock.acquire(timeout=DEADLINE), "the store's lock is held"
        store_lock.release()
        wait_state(door, rpc.result("ListTasks", {})["tasks"][0]["id"], "TASK_STATE_COMPLETED")
        # ... and its records reach the file in order once the disk moves.
        reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        start, end = _read_lines(reader, 2, time.monotonic() + DEADLINE)
        assert [start["event_type"], end["event_type"]] == ["task_start", "task_end"]
        assert end["parent_id"] == start["event_id"]
        thread.join(DEADLINE)
        assert answered and answered[0]["task"]["id"] == start["task_id"]
    finally:
        if reader is None:
            reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)     # let a stuck writer go
        thread.join(DEADLINE)
        os.close(reader)
        door.close()


def test_each_line_is_exactly_what_the_json_encoder_writes(rpc):
    # The task records are written as text (trace.py): they must read as the encoder writes.
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    done = rpc.result("SendMessage", send_params("first"))["task"]
    odd = 'ctx "q" \\ é \u2028 \x01'
    rpc.result("SendMessage", send_params(
        "second", contextId=odd, referenceTaskIds=[done["id"], 'tsk_"x"'],
        parts=[{"text": "look"}, {"raw": base64.b64encode(PNG).decode(),
                                  "mediaType": "image/png"}]))
    session = rpc.door.session
    session.trace.write("harness_note", session.trace.session_event, note=odd, n=[1, None])
    session.trace.write("harness_note", None, timestamp="mine", event_id="evt_mine")
    raw = Path(trace_path(session.id)).read_bytes().decode("utf-8").split("\n")
    assert raw[-1] == "" and len(raw) == 8
    for line in raw[:-1]:
        assert line == dumps(json.loads(line)), line
    records = [json.loads(line) for line in raw[:-1]]
    second = records[3]
    assert second["event_type"] == "task_start" and second["context_id"] == odd
    assert second["referenced_tasks"] == [done["id"], 'tsk_"x"']
    assert second["attachments"] == [{"media_type": "image/png", "bytes": len(PNG)}]
    assert records[5]["note"] == odd and records[5]["n"] == [1, None]
    assert list(records[6])[:5] == HEAD
    assert records[6]["timestamp"] == "mine" and records[6]["event_id"] == "evt_mine"


@pytest.mark.parametrize("trace", [True, False])
def test_an_agents_record_may_name_any_field(trace):
    # Fields named like the writer's own parameters are the record's, nothing else.
    def agent(ctx):
        return ctx.record_event("note", task_id="tsk_other", starts_task="tsk_fake",
                                flush=False, event_type_of="x") or "untraced"

    door = create_app({"name": "notes", "version": "0.1.0"}, agent=agent, trace=trace)
    try:
        task = Rpc(door).result("SendMessage", send_params("go"))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        if not trace:
            return
        start, = [r for r in records_of(door, "task_start") if r["task_id"] == task["id"]]
        note, = records_of(door, "note")
        assert note["parent_id"] == start["event_id"]
        assert {k: note[k] for k in ("task_id", "starts_task", "flush", "event_type_of")} == \
            {"task_id": "tsk_other", "starts_task": "tsk_fake", "flush": False,
             "event_type_of": "x"}
        assert "tsk_fake" not in door.session.trace._tasks
    finally:
        door.close()
