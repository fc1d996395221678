"""Any harness, on the hub: whatever lines a harness process writes (docs/harness.md's, well
formed or one member off, garbage, or nothing at all), its task ends with one final state,
its stream, its replay and GetTask tell the same task, and a2a-sdk reads every task of the
agent.

Each example is a real process (tests/harness_told.py) writing the generated lines, on
the memory store and on a redis-server: a streaming message to it, then the task read
back. COMPLETED, FAILED or REJECTED (the hub never asks for input), never a hang.
"""
from __future__ import annotations

import json
import sys

import pytest
from a2a.types.a2a_pb2 import ListTasksResponse
from a2a.utils.proto_utils import parse_lenient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_wsgi.hub import create_hub
from tests.hub.conftest import (KEY_A, HubClient, agent, close_hub, hub_config, module_store,
                                send_params, sha)
from tests.hub.fold_util import FINAL, fold, read_stream, told

pytestmark = pytest.mark.one_store          # the module's own hubs: memory and Redis

EXAMPLES = 30


@pytest.fixture(scope="module", params=["memory", "redis"])
def rpc(request):
    config = hub_config(store=module_store(request),
                        limits={"concurrency": 100, "rate_per_minute": 1_000_000},
                        tenants={"acme": {"api_keys": [sha(KEY_A)], "agents": {
                            "h": agent({"process": [sys.executable, "tests/harness_told.py"],
                                        "idle_timeout_secs": 5})}}})
    hub = create_hub(config)
    yield HubClient(hub, agent="h")
    close_hub(hub)


words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
names = st.sampled_from(["a", "b", "response"])
parts = st.sampled_from([{"text": "t"}, {"raw": "aGk=", "mediaType": "application/pdf"},
                         {"url": "https://example.com/x"}, {"data": {"k": [1, 2.5, None]}},
                         {"text": "t", "data": 1}, {}])
anything = st.none() | st.booleans() | st.integers(-3, 3) | words | st.just([]) | st.just({})
lines = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": words},
                          optional={"final": st.booleans()}),
    st.fixed_dictionaries({"type": st.just("thinking"), "text": words}),
    st.fixed_dictionaries({"type": st.just("tool-call-started"), "toolName": words},
                          optional={"input": anything}),
    st.fixed_dictionaries({"type": st.just("artifact-add"), "name": names,
                           "parts": st.lists(parts, min_size=1, max_size=2)}),
    st.fixed_dictionaries({"type": st.just("artifact-chunk"), "name": names},
                          optional={"part": parts, "last": st.booleans()}),
    st.fixed_dictionaries({"type": st.just("usage"), "inputTokens": st.integers(0, 99)},
                          optional={"model": st.sampled_from(["gpt-4o", "other"])}),
    st.fixed_dictionaries({"type": st.just("quota")}, optional={"left": anything}),
    st.fixed_dictionaries({"type": st.sampled_from(["session", "suggested-prompt", "ask"]),
                           "text": words, "id": words}),
    st.fixed_dictionaries({"type": st.sampled_from(["response", "fail", "reject"]),
                           "text": words, "message": words}),
    st.fixed_dictionaries({"type": st.just("complete")},
                          optional={"text": words, "statusMessage": words}),
)


@st.composite
def scripts(draw):
    """Lines a harness writes: JSON objects, one now and then with a member off or not JSON."""
    written = []
    for line in draw(st.lists(lines, max_size=6)):
        if line and draw(st.integers(0, 9)) == 0:
            key = draw(st.sampled_from(sorted(line)))
            line = dict(line, **{key: draw(anything)})
        text = json.dumps(line)
        if draw(st.integers(0, 19)) == 0:
            text = draw(st.sampled_from(["not json", "[1]", '{"type": 5}', "", text[:-1]]))
        written.append(text)
    return written


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(script=scripts())
def test_any_harness_ends_its_task_and_tells_one_task(rpc, script):
    live = read_stream(rpc.call("SendStreamingMessage", send_params(json.dumps(script))))
    task_id = live[0]["task"]["id"]
    read = rpc.result("GetTask", {"id": task_id})
    stored = told(read)
    assert stored["state"] in FINAL, (script, read["status"])
    assert fold(live, task_id) == stored, (script, live)
    assert fold(read_stream(rpc.call("SubscribeToTask", {"id": task_id})), task_id) == stored
    parse_lenient(rpc.result("ListTasks", {"includeArtifacts": True, "pageSize": 5}),
                  ListTasksResponse())
