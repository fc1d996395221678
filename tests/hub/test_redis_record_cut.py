"""A finished task's record on Redis is answered from its stored form, cut where a read
asks (where its artifacts and its history begin, found in the text), not parsed and
encoded again: GetTask with ``historyLength`` and ListTasks answer byte for byte as they
did by parsing (``_shape`` made to find nothing, as for a form written by hand), messages
past ASCII and messages that quote the places' marks included. A running task's form is
joined from the JSON texts its record keeps, as its parse then encoding made it."""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.hub.store import redis_reads
from murmur_wsgi.hub.store.redis_keys import task_key
from murmur_wsgi.hub.task import HubTask
from murmur_wsgi.wire.encode import compact_utf8
from tests.hub.agents import gate
from tests.hub.conftest import HubClient, close_hub, redis_hub

pytestmark = pytest.mark.cluster

READS = [("GetTask", {"historyLength": 0}), ("GetTask", {"historyLength": 1}),
         ("GetTask", {"historyLength": 7}), ("GetTask", {}),
         ("ListTasks", {}), ("ListTasks", {"includeArtifacts": True}),
         ("ListTasks", {"historyLength": 0}),
         ("ListTasks", {"historyLength": 0, "includeArtifacts": True}),
         ("ListTasks", {"historyLength": 2, "includeArtifacts": False})]


def _answers(client: HubClient, task_id: str) -> list[bytes]:
    found = []
    for method, params in READS:
        params = dict(params, id=task_id) if method == "GetTask" else params
        data = client.call(method, params).get_data()
        found.append(data.split(b',"result":', 1)[1])     # the bytes after the envelope's id
    return found


# A message whose text and metadata quote the marks of the places: in its text they are
# escaped; in its metadata, bare, but without the task's id, made after it was sent.
QUOTING = {"messageId": "m-quoting", "role": "ROLE_USER",
           "parts": [{"text": ',"history":[{"messageId":"m-quoting" ,"artifacts":['}],
           "metadata": {"history": [{"messageId": "m-quoting", "contextId": "c"}],
                        "artifacts": [1, 2]}}


def test_reads_cut_from_the_form_answer_as_the_parse_did(redis_server, monkeypatch):
    hub = redis_hub(redis_server, limits={"rate_per_minute": 4})
    client = HubClient(hub)
    try:
        tasks = [client.send("héllo wörld ✓ " + "ü" * 300),       # past ASCII
                 client.send("plain ascii " * 40),
                 client.send("/fail no artifacts, ünï ✓"),             # its status past ASCII
                 client.result("SendMessage", {"message": QUOTING})["task"],
                 client.send("refused at its creation: ✓")]          # past the rate
        assert tasks[4]["status"]["state"] == "TASK_STATE_REJECTED"
        for task in tasks:
            record = hub.store.get("acme", "echo", task["id"])
            assert record._history is None and record._shape[2] == 1     # read, not parsed
        cut = [_answers(client, task["id"]) for task in tasks]
        monkeypatch.setattr(redis_reads, "_shape", lambda wire, fields: None)
        assert hub.store.get("acme", "echo", tasks[0]["id"])._history is not None
        parsed = [_answers(client, task["id"]) for task in tasks]
        assert cut == parsed
    finally:
        close_hub(hub)


def test_a_form_written_by_hand_is_parsed(redis_server):
    """A finished record whose form does not hold its history where its ids say (written by
    hand, or by a hub that stored its message otherwise) is parsed, as before."""
    hub = redis_hub(redis_server)
    client = HubClient(hub)
    store = redis_server.client()
    try:
        task = client.send("by hand")
        key = task_key("acme", task["id"])
        wire = store.hget(key, "wire")
        store.hset(key, "wire", wire.replace('"taskId":', '"taskId" :', 1))
        assert hub.store.get("acme", "echo", task["id"])._history is not None
        read = client.result("GetTask", {"id": task["id"], "historyLength": 0})
        assert read["id"] == task["id"] and "history" not in read
    finally:
        close_hub(hub)


def _parsed(fields: dict, history_length, artifacts: bool) -> str:
    """A running record as the store rendered it before: parsed, then encoded again."""
    task = HubTask(fields["id"], fields["ctx"], fields["tenant"], fields["agent"],
                   fields["msg"], None)
    task.history, task.artifacts = json.loads(fields["hist"]), json.loads(fields["arts"])
    task.state, task.status_text = fields["state"], json.loads(fields["text"])
    task.status_ms, task.created_ms = int(fields["ms"]), int(fields["created"])
    return compact_utf8(task.to_dict(history_length, artifacts))


def test_a_running_tasks_reads_join_its_records_texts(redis_server):
    hub = redis_hub(redis_server, {"held": "tests.hub.agents:held"})
    client = HubClient(hub, "held")
    store = redis_server.client()
    try:
        task = client.send("run-cut ✓ ünï", configuration={"returnImmediately": True})
        fields = store.hgetall(task_key("acme", task["id"]))
        assert fields["state"] == "TASK_STATE_WORKING" and "wire" not in fields
        record = hub.store.get("acme", "held", task["id"])
        assert record._history is None and record._shape[2] == 1     # joined, not parsed
        for length, artifacts in [(None, True), (0, True), (1, False), (3, True)]:
            assert hub.store.render(record, length, artifacts, as_read=True) == \
                _parsed(fields, length, artifacts), (length, artifacts)
        answer = client.call("GetTask", {"id": task["id"]}).get_data()
        assert answer.split(b',"result":', 1)[1] == \
            _parsed(fields, None, True).encode() + b"}"
    finally:
        gate("run-cut ✓ ünï").set()
        close_hub(hub)
