"""forgetSession: the context -> harness session map, and the forget on a process capsule."""
from __future__ import annotations

import sys

import pytest

from murmur_wsgi.uris import DOOR_URI
from murmur_wsgi import create_app
from tests.agents_util import (FAULTS, REPO, harness_rpc, process_manifest, records_of,
                               response_of, status_text, task_records, tmp_home, trace_of)
from tests.conftest import Rpc, make_door
from tests.tasks_util import send_params

THREADED = {"conversation": "threaded"}
META = f'message.metadata["{DOOR_URI}"]'


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


def forget(value=True):
    return {"metadata": {DOOR_URI: {"forgetSession": value}}, "extensions": [DOOR_URI]}


@pytest.fixture
def threaded():
    rpc = harness_rpc(FAULTS + ["session"], THREADED)
    yield rpc
    rpc.door.close()


def send(rpc, context_id, headers=None, **extra):
    """One task in ``context_id``; return (task, what the harness was told of its session)."""
    response = rpc.call("SendMessage", send_params("go", contextId=context_id, **extra),
                        headers)
    task = response.get_json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return task, response_of(task), response


def harness_start(rpc, task):
    (start,) = task_records(rpc.door, task["id"], "harness_start")
    return start["session_mode"], start["harness_session_id"]


def test_a_context_resumes_the_session_its_harness_announced(threaded):
    first, told, _ = send(threaded, "ctx-a")
    assert told == "new None"
    assert harness_start(threaded, first) == ("new", None)
    announced = f"s-{first['id']}"
    assert threaded.door.session.agent.harness_session("ctx-a") == announced
    second, told, _ = send(threaded, "ctx-a")
    assert told == f"resume {announced}"
    assert harness_start(threaded, second) == ("resume", announced)
    other, told, _ = send(threaded, "ctx-b")
    assert told == "new None"


def test_a_context_id_resumes_only_its_own_credentials_session():
    # Two credentials sending one contextId hold two conversations: the second never
    # resumes the first's harness session (and so its model conversation).
    manifest = process_manifest(FAULTS + ["session"], THREADED)
    manifest["network"] = {"authentication": {"scheme": "bearer", "credentials": {
        "alpha": {"scopes": ["SendMessage"]}, "beta": {"scopes": ["SendMessage"]}}}}
    rpc = Rpc(create_app(manifest, listen="127.0.0.1:41873", trace=True))
    bearer = {name: {"Authorization": f"Bearer {token}"}
              for name, token in rpc.door.tokens.tokens.items()}
    try:
        first, told, _ = send(rpc, "ctx-shared", bearer["alpha"])
        assert told == "new None"
        _, told, _ = send(rpc, "ctx-shared", bearer["beta"])
        assert told == "new None"
        again, told, _ = send(rpc, "ctx-shared", bearer["alpha"])
        assert told == f"resume s-{first['id']}"
        assert harness_start(rpc, again) == ("resume", f"s-{first['id']}")
        agent = rpc.door.session.agent
        assert agent.harness_session("ctx-shared", "alpha") == f"s-{first['id']}"
        assert agent.harness_session("ctx-shared") is None        # nor the operator's
    finally:
        rpc.door.close()


def test_forget_drops_the_session_then_the_next_message_resumes_the_new_one(threaded):
    first, _, _ = send(threaded, "ctx-a")
    dropped = f"s-{first['id']}"
    forgetting, told, response = send(threaded, "ctx-a", **forget())
    assert response.headers["A2A-Extensions"] == DOOR_URI
    assert told == "new None"
    assert harness_start(threaded, forgetting) == ("new", None)
    (record,) = task_records(threaded.door, forgetting["id"], "harness_session_forgotten")
    assert {k: record[k] for k in ("context_id", "harness_session_id", "requested_by")} == {
        "context_id": "ctx-a", "harness_session_id": dropped, "requested_by": "a2a"}
    # The forget comes before the harness starts: its record precedes harness_start.
    kinds = [r["event_type"] for r in trace_of(threaded.door)]
    at = kinds.index("harness_session_forgotten")
    assert kinds[at + 1] == "harness_start"
    # It applies to that one task: the next message resumes the new session.
    after, told, _ = send(threaded, "ctx-a")
    assert told == f"resume s-{forgetting['id']}"
    assert harness_start(threaded, after) == ("resume", f"s-{forgetting['id']}")


def test_forget_on_a_context_without_a_session_drops_nothing(threaded):
    task, told, _ = send(threaded, "ctx-new", **forget())
    assert told == "new None"
    assert harness_start(threaded, task) == ("new", None)
    assert records_of(threaded.door, "harness_session_forgotten") == []


def test_forget_false_asks_for_nothing(threaded):
    first, _, _ = send(threaded, "ctx-a")
    task, told, _ = send(threaded, "ctx-a", **forget(False))
    assert told == f"resume s-{first['id']}"
    assert records_of(threaded.door, "harness_session_forgotten") == []


def test_a_stateless_conversation_starts_every_task_new():
    rpc = harness_rpc(FAULTS + ["session"])
    try:
        send(rpc, "ctx-a")
        task, told, _ = send(rpc, "ctx-a")
        assert told == "new None"
        assert harness_start(rpc, task) == ("new", None)
        send(rpc, "ctx-a", **forget())
        assert records_of(rpc.door, "harness_session_forgotten") == []
    finally:
        rpc.door.close()


REFUSALS = [
    pytest.param({"metadata": {DOOR_URI: True}}, f"Invalid params: {META} must be an object",
                 id="not-an-object"),
    pytest.param({"metadata": {DOOR_URI: {"forgetSession": "yes"}}},
                 f"Invalid params: {META}.forgetSession must be a boolean", id="not-a-boolean"),
    pytest.param(dict(forget(), taskId="tsk_x"),
                 "Invalid params: forgetSession starts a new conversation, so it goes on a "
                 "message that starts a task, not on one that continues task tsk_x",
                 id="with-task-id"),
]


@pytest.mark.parametrize("extra, message", REFUSALS)
def test_a_refused_forget_starts_nothing_and_writes_nothing(threaded, extra, message):
    error = threaded.error("SendMessage", send_params("go", contextId="ctx-a", **extra))
    assert error == {"code": -32602, "message": message}
    assert len(threaded.door.session.store) == 0
    assert [r["event_type"] for r in trace_of(threaded.door)] == ["session_start"]


def test_forget_to_a_capsule_not_on_process_is_refused():
    door = make_door()
    try:
        error = Rpc(door).error("SendMessage", send_params("go", **forget()))
        assert error == {"code": -32602, "message":
                         "forgetSession asks this capsule to forget the harness session this "
                         "context names, and only a capsule on inference.transport: process "
                         "has one"}
        assert len(door.session.store) == 0
    finally:
        door.close()


def test_a_long_context_id_is_remembered_by_its_digest(threaded):
    # The map kept each context id itself as its key: 100 tasks of 1 MB context ids on a
    # threaded harness held 102 MB there (up to 10,000 of whatever the body allows); now
    # 3 MB, whatever the ids' length.
    long_id = "ctx-" + "c" * 200_000
    first, told, _ = send(threaded, long_id)
    assert told == "new None"
    _, told, _ = send(threaded, long_id)
    assert told == f"resume s-{first['id']}"
    _, told, _ = send(threaded, long_id[:-1])
    assert told == "new None"
    keys = list(threaded.door.session.agent._sessions)
    assert len(keys) == 2
    assert all(len(repr(key)) < 200 for key in keys)


def test_a_session_id_that_is_not_text_is_refused_not_kept():
    # NOTE: before, an id with a lone surrogate was kept: the context's next task failed
    # "the agent failed: UnicodeEncodeError" (its harness_start trace record could not be
    # written), and so did every later one until the context was forgotten.
    rpc = harness_rpc([sys.executable, str(REPO / "tests" / "harness_script.py"),
                       '{"type":"session","id":"s-\\udc00"}',
                       '{"type":"response","text":"@task"}'], THREADED)
    try:
        task = rpc.result("SendMessage", send_params("go", contextId="ctx-s"))["task"]
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert status_text(task) == "the agent's answer is not valid JSON"
        assert rpc.door.session.agent.harness_session("ctx-s") is None
        again = rpc.result("SendMessage", send_params("go", contextId="ctx-s"))["task"]
        assert status_text(again) == "the agent's answer is not valid JSON"
        assert harness_start(rpc, again) == ("new", None)
    finally:
        rpc.door.close()
