"""A finished task's record on Redis is answered from its stored form, cut where a read
asks (its ``cut``: where its artifacts and its history begin, in bytes), not parsed and
encoded again: GetTask with ``historyLength`` and ListTasks answer byte for byte as they
did by parsing (the record read again without its ``cut``, the way of a task that ended
before it was written), a message of characters past ASCII included, and a ``cut`` that
does not fit its form (written by hand) falls back to the parse."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.store.redis_keys import task_key
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


def test_reads_cut_from_the_form_answer_as_the_parse_did(redis_server):
    hub = redis_hub(redis_server, limits={"rate_per_minute": 3})
    client = HubClient(hub)
    store = redis_server.client()
    try:
        tasks = [client.send("héllo wörld ✓ " + "ü" * 300),       # past ASCII
                 client.send("plain ascii " * 40),
                 client.send("/fail no artifacts"),
                 client.send("refused at its creation: ✓")]          # past the rate
        assert tasks[3]["status"]["state"] == "TASK_STATE_REJECTED"
        keys = [task_key("acme", task["id"]) for task in tasks]
        assert all(store.hget(key, "cut") for key in keys)
        record = hub.store.get("acme", "echo", tasks[0]["id"])
        assert record._history is None and record._shape[2] == 1     # read, not parsed
        cut = [_answers(client, task["id"]) for task in tasks]
        for key in keys:
            store.hdel(key, "cut")
        assert hub.store.get("acme", "echo", tasks[0]["id"])._history is not None
        parsed = [_answers(client, task["id"]) for task in tasks]
        assert cut == parsed
        for key, task in zip(keys, tasks):                 # a cut that does not fit
            length = len(store.hget(key, "wire").encode())
            for wrong in ("3 4", f"1 {length}", "x y", "5", f"{length} {length}"):
                store.hset(key, "cut", wrong)
                assert _answers(client, task["id"]) == parsed[tasks.index(task)], wrong
    finally:
        close_hub(hub)
