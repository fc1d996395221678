"""A task's events against what it stores: for any run, the events a client reads live
(SendStreamingMessage), those SubscribeToTask replays once it is over, and the task
GetTask answers tell the same task.

A client folds a task's events as a2a-sdk's task manager does: the first event's Task,
then each ``statusUpdate`` its status and each ``artifactUpdate`` its artifact (``append``
adds the parts to the artifact of that id, else it is the artifact). For any script of
the test agent ``scripted`` (tokens, progress, frames, whole and streamed artifacts in
any order, a failure, a name written twice), on the memory store and on a redis-server:
the live fold, the replay's fold and GetTask agree on the state, the status message and
the artifacts (by id, as a client finds them: GetTask lists the agent's named ones before
``answer``, which a stream may have opened first; runs of text parts compared as their
text: the store may keep a token run merged), every event is of the task, and the last
one, and only it, is final. The stale sweep's fold of the replayed log
(``hub.task.artifacts_of``) gives GetTask's artifacts, in GetTask's order.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.task import artifacts_of
from tests.hub.conftest import (KEY_A, HubClient, agent, close_hub, hub_config, module_store,
                                send_params, sha, sse_events)

pytestmark = pytest.mark.one_store          # the module's own hubs: memory and Redis

FINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
         "TASK_STATE_REJECTED"}


@pytest.fixture(scope="module", params=["memory", "redis"])
def rpc(request):
    config = hub_config(store=module_store(request),
                        limits={"concurrency": 100, "rate_per_minute": 1_000_000},
                        tenants={"acme": {"api_keys": [sha(KEY_A)], "agents": {
                            "scripted": agent("tests.hub.agents:scripted")}}})
    hub = create_hub(config)
    yield HubClient(hub, agent="scripted")
    close_hub(hub)


words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                max_size=6)
names = st.sampled_from(["a", "b", "notes"])
steps = st.lists(st.one_of(
    st.tuples(st.just("write"), words), st.tuples(st.just("progress"), words),
    st.tuples(st.just("think"), words), st.tuples(st.just("tool"), names),
    st.tuples(st.just("add"), names, words), st.tuples(st.just("open"), names),
    st.tuples(st.just("chunk"), names, words, st.booleans()),
    st.tuples(st.just("close"), names), st.tuples(st.just("status"), words),
    st.tuples(st.just("fail"), words)), max_size=12)


def fold(events: list, task_id: str) -> dict:
    """The task a client builds from a task's stream (each event: a JSON-RPC result)."""
    task = None
    for at, event in enumerate(events):
        assert list(event) in (["task"], ["statusUpdate"], ["artifactUpdate"]), event
        (kind, body), = event.items()
        final = (body["status"] if kind != "artifactUpdate" else {})["state"] in FINAL \
            if kind != "artifactUpdate" else False
        assert final == (at == len(events) - 1) or kind == "task", (at, events)
        if kind == "task":
            assert task is None and body["id"] == task_id
            task = {"status": body["status"], "artifacts": list(body.get("artifacts", []))}
            continue
        assert task is not None and body["taskId"] == task_id
        if kind == "statusUpdate":
            task["status"] = body["status"]
            continue
        artifact, found = body["artifact"], None
        for i, held in enumerate(task["artifacts"]):
            if held["artifactId"] == artifact["artifactId"]:
                found = i
        if found is None:
            task["artifacts"].append(dict(artifact, parts=list(artifact["parts"])))
        elif body.get("append"):
            held = task["artifacts"][found]
            task["artifacts"][found] = dict(held, parts=held["parts"] + artifact["parts"])
        else:
            task["artifacts"][found] = dict(artifact, parts=list(artifact["parts"]))
    assert task is not None
    return told(task)


def told(task: dict) -> dict:
    """What a task tells: its state, its status message's parts, its artifacts (a run of
    text parts of one media type read as one text)."""
    artifacts = []
    for artifact in task.get("artifacts", []):
        parts = []
        for part in artifact["parts"]:
            if parts and set(part) == set(parts[-1]) == {"text", "mediaType"} and \
                    part["mediaType"] == parts[-1]["mediaType"]:
                parts[-1] = dict(parts[-1], text=parts[-1]["text"] + part["text"])
            else:
                parts.append(part)
        artifacts.append(dict(artifact, parts=parts))
    message = task["status"].get("message")
    return {"state": task["status"]["state"], "message": message and message["parts"],
            "artifacts": {artifact["artifactId"]: artifact for artifact in artifacts}}


def _events(response) -> list:
    """A stream's results, read whole; the response closed (as a WSGI server closes it:
    a SubscribeToTask gives its tenant's slot back then)."""
    try:
        return [event["result"] for event in sse_events(response)]
    finally:
        response.close()


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(script=steps)
@example(script=[("write", "part"), ("add", "a", "x"), ("fail", "boom")])   # kept on FAILED
@example(script=[("open", "b"), ("chunk", "b", "1", False), ("add", "b", "again")])
def test_live_replayed_and_stored_tell_the_same_task(rpc, script):
    live = _events(rpc.call("SendStreamingMessage", send_params(json.dumps(script))))
    task_id = live[0]["task"]["id"]
    replay = _events(rpc.call("SubscribeToTask", {"id": task_id}))
    read = rpc.result("GetTask", {"id": task_id})
    stored = told(read)
    assert stored["state"] in FINAL
    assert fold(live, task_id) == stored, (script, live)
    assert fold(replay, task_id) == stored, (script, replay)
    # The stale sweep's fold of a task's log (hub/task.py): the artifacts and their order.
    swept = artifacts_of(json.dumps(event) for event in replay)
    assert [artifact["artifactId"] for artifact in swept] == \
        [artifact["artifactId"] for artifact in read.get("artifacts", [])]
    assert told(dict(read, artifacts=swept)) == stored
