"""Who sees a task: the operator and a public door see all, a credential what it started."""
from __future__ import annotations

import pytest

from tests.conftest import Rpc
from tests.sse_util import CANCELED, COMPLETED, msg, open_stream, stream_door

TASK_SCOPES = ["SendMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask"]
AUTH = {"scheme": "bearer", "credentials": {
    "alice": {"scopes": TASK_SCOPES},
    "bob": {"scopes": TASK_SCOPES},
    "watcher": {"scopes": ["murmur.WatchSession", "murmur.StopSession"]},
}}
NEVER_HELD = "tsk_" + "9" * 32


def not_found(task_id):
    """-32001 exactly as an id the session never held is answered."""
    return {"code": -32001, "message": "Task not found", "data": [{
        "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND",
        "domain": "a2a-protocol.org", "metadata": {"taskId": task_id}}]}


class Callers:
    """One authenticated door, and a request helper per credential."""

    def __init__(self, **overrides):
        self.door = stream_door(network={"authentication": AUTH}, **overrides)
        self.rpc = Rpc(self.door)

    def headers(self, name):
        return {"Authorization": f"Bearer {self.door.tokens.tokens[name]}"}

    def call(self, name, method, params):
        return self.rpc.call(method, params, self.headers(name)).get_json()

    def run(self, name, text="hello"):
        """A task ``name`` started and saw to its end (held SendMessage)."""
        task = self.call(name, "SendMessage", msg(text))["result"]["task"]
        assert task["status"]["state"] == COMPLETED
        return task["id"]

    def listed(self, name, **params):
        return [task["id"] for task in self.call(name, "ListTasks", params)["result"]["tasks"]]


@pytest.fixture
def callers():
    c = Callers()
    yield c
    c.door.close()


def test_get_task_shows_a_credential_only_its_own(callers):
    mine = callers.run("alice")
    assert callers.call("alice", "GetTask", {"id": mine})["result"]["id"] == mine
    assert callers.call("operator", "GetTask", {"id": mine})["result"]["id"] == mine
    assert callers.call("bob", "GetTask", {"id": mine})["error"] == not_found(mine)
    assert callers.call("bob", "GetTask", {"id": NEVER_HELD})["error"] == not_found(NEVER_HELD)


def test_list_tasks_lists_a_credential_only_its_own(callers):
    a1, b1, a2 = callers.run("alice"), callers.run("bob"), callers.run("alice")
    assert callers.listed("alice") == [a2, a1]
    assert callers.listed("bob") == [b1]
    assert callers.listed("operator") == [a2, b1, a1]
    assert callers.call("bob", "ListTasks", {})["result"]["totalSize"] == 1


def test_a_page_token_shows_another_caller_only_its_own_tasks(callers):
    b1 = callers.run("bob")
    callers.run("alice")
    callers.run("alice")
    page = callers.call("alice", "ListTasks", {"pageSize": 1})["result"]
    assert page["nextPageToken"]
    assert callers.listed("bob", pageToken=page["nextPageToken"]) == [b1]
    assert callers.listed("bob", pageToken=page["nextPageToken"], pageSize=1) == [b1]


def test_cancel_task_on_a_task_not_seen_is_not_found_not_ended(callers):
    mine = callers.run("alice")
    assert callers.call("alice", "CancelTask", {"id": mine})["error"]["code"] == -32002
    assert callers.call("bob", "CancelTask", {"id": mine})["error"] == not_found(mine)


def test_subscribe_to_a_task_not_seen_is_not_found_not_ended(callers):
    mine = callers.run("alice")
    assert callers.call("alice", "SubscribeToTask", {"id": mine})["error"]["code"] == -32004
    assert callers.call("bob", "SubscribeToTask", {"id": mine})["error"] == not_found(mine)


def test_a_reply_to_a_task_not_seen_is_not_found(callers):
    asked = callers.call("alice", "SendMessage", msg("/ask Which colour?"))["result"]["task"]
    reply = msg("blue", taskId=asked["id"])
    assert callers.call("bob", "SendMessage", reply)["error"] == not_found(asked["id"])
    done = callers.call("alice", "SendMessage", msg("blue", taskId=asked["id"]))
    assert done["result"]["task"]["status"]["state"] == COMPLETED


def test_a_reference_to_a_task_not_seen_reads_as_one_never_held(callers):
    theirs = callers.run("alice")
    text = "/raw look"
    seen = callers.call("bob", "SendMessage", msg(text, referenceTaskIds=[theirs]))
    never = callers.call("bob", "SendMessage", msg(text, referenceTaskIds=[NEVER_HELD]))
    answer = [task["result"]["task"]["artifacts"][0]["parts"][0]["text"] for task in (seen, never)]
    assert "not a task this capsule holds" in answer[0]
    assert answer[0].replace(theirs, NEVER_HELD) == answer[1]
    own = callers.call("alice", "SendMessage", msg(text, referenceTaskIds=[theirs]))
    assert "not a task this capsule holds" not in \
        own["result"]["task"]["artifacts"][0]["parts"][0]["text"]


def test_stop_session_reaches_every_task():
    c = Callers()
    try:
        asked = c.call("alice", "SendMessage", msg("/ask Which colour?"))["result"]["task"]
        stopped = c.call("watcher", "murmur.StopSession", {})["result"]
        assert stopped["canceled"] == [asked["id"]]
        assert c.call("alice", "GetTask", {"id": asked["id"]})["result"]["status"]["state"] \
            == CANCELED
    finally:
        c.door.close()


def test_watch_session_carries_every_tasks_events():
    c = Callers()
    try:
        watch = open_stream(c.rpc, "murmur.WatchSession", {}, c.headers("watcher"))
        first, second = c.run("alice"), c.run("bob")
        events = watch.until(lambda e: e.task_id == second and e.state == COMPLETED)
        assert {e.task_id for e in events if e.task_id} == {first, second}
        watch.close()
    finally:
        c.door.close()


def test_a_public_door_shows_every_caller_every_task():
    door = stream_door()
    rpc = Rpc(door)
    try:
        task = rpc.result("SendMessage", msg("hello"))["task"]["id"]
        other = {"Authorization": "Bearer anyone"}      # ignored on a public door
        assert rpc.result("GetTask", {"id": task}, other)["id"] == task
        assert [t["id"] for t in rpc.result("ListTasks", {}, other)["tasks"]] == [task]
    finally:
        door.close()
