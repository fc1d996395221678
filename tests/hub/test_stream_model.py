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
                                send_params, sha)
from tests.hub.fold_util import FINAL, fold, read_stream, told

pytestmark = pytest.mark.one_store          # the module's own hubs: memory and Redis

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


@settings(max_examples=40, deadline=None, database=None,
          derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(script=steps)
@example(script=[("write", "part"), ("add", "a", "x"), ("fail", "boom")])   # kept on FAILED
@example(script=[("open", "b"), ("chunk", "b", "1", False), ("add", "b", "again")])
def test_live_replayed_and_stored_tell_the_same_task(rpc, script):
    live = read_stream(rpc.call("SendStreamingMessage", send_params(json.dumps(script))))
    task_id = live[0]["task"]["id"]
    replay = read_stream(rpc.call("SubscribeToTask", {"id": task_id}))
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
