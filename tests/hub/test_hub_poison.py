"""What one client can send that would break others' reads, or cost the worker before
admission: line-breaking characters in SSE data as a2a-sdk reads it, message fields of the
wrong type kept in history, a part's unknown fields kept in history, data parts rendered
for the agent without a bound."""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from a2a.client.transports.http_helpers import parse_sse_stream
from a2a.types import a2a_pb2
from google.protobuf import json_format

from tests.hub.conftest import HubClient, close_hub, hub_config, send_params
from murmur_wsgi.hub import create_hub


def _a2a_sdk_events(body: bytes) -> list[str]:
    """The data of each event as a2a-sdk's JSON-RPC transport reads an SSE body."""
    async def read():
        response = httpx.Response(200, content=body,
                                  headers={"Content-Type": "text/event-stream"})
        return [data async for _name, data in parse_sse_stream(response)]
    return asyncio.run(read())


# A text the hub stores and echoes: U+2028, U+2029 and U+0085 are JSON text as they are
# (RFC 8259), but every str.splitlines() reader (httpx's line decoder, a2a-sdk's SSE
# parser on it) breaks a data: line there.
LINE_BREAKING = "before\u2028middle\u2029and\x85after"


def test_a_stored_line_separator_does_not_break_an_a2a_sdk_subscriber(rpc):
    task = rpc.send(LINE_BREAKING)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    body = rpc.call("SubscribeToTask", {"id": task["id"]}).get_data()
    events = _a2a_sdk_events(body)
    assert events, body[:200]
    for data in events:
        json.loads(data)                       # JSONDecodeError: the line was cut


def test_a_line_separator_does_not_break_an_a2a_sdk_streaming_reader(rpc):
    body = rpc.call("SendStreamingMessage", send_params(LINE_BREAKING)).get_data()
    events = _a2a_sdk_events(body)
    assert events, body[:200]
    for data in events:
        json.loads(data)


def _sdk_reads_list_tasks(rpc) -> None:
    """Every a2a-sdk client of the tenant reads the agent's ListTasks (parse_lenient)."""
    from a2a.types.a2a_pb2 import ListTasksResponse
    from a2a.utils.proto_utils import parse_lenient
    parse_lenient(rpc.result("ListTasks", {"includeArtifacts": True}), ListTasksResponse())


# The hub stores message.metadata, .extensions, .referenceTaskIds and each part's metadata
# as sent, whatever their type; the door refuses each (wire/message_shapes.py). Stored,
# one such message makes the agent's every ListTasks page holding it unreadable to an
# a2a-sdk client (Struct / repeated string), for every client of the tenant.
@pytest.mark.parametrize("extra", [
    {"metadata": "not an object"},
    {"extensions": [1]},
    {"referenceTaskIds": "r" * 1000},          # not a list: past the 256-byte id cap too
    {"referenceTaskIds": [["r" * 1000]]},
    {"parts": [{"text": "hi", "metadata": 5}]},
])
def test_a_message_field_of_the_wrong_type_is_refused(rpc, extra):
    params = send_params("hi")
    params["message"].update(extra)
    response = rpc.call("SendMessage", params).get_json()
    assert response.get("error", {}).get("code") == -32602, str(response)[:300]
    _sdk_reads_list_tasks(rpc)


# --- a data part's rendering, before admission --------------------------------------

SEEN_TEXTS: list[int] = []


def record_and_refuse(tenant, agent, text):
    """An admission hook: records the length of the text it is given, refuses the run."""
    SEEN_TEXTS.append(len(text))
    return "refused by the test's hook"


# The door bounds a message's data parts as rendered for the agent (limits.data_text_bytes,
# 16 MiB; docs/security.md: "a body of arrays nested 58 deep rendered to about 60 times its
# size"). The hub renders them (indent 2, the pure-Python encoder) with no bound, before
# admission: a body under the hub's 1 MiB limit becomes ~50 MB of text and seconds of CPU,
# spent even for a run that admission (a hook, the rate limit) then refuses.
def test_data_parts_rendered_for_the_agent_are_bounded_before_admission(store):
    config = hub_config(store=store)
    config["tenants"]["acme"]["admission"] = "tests.hub.test_hub_poison:record_and_refuse"
    h = create_hub(config)
    try:
        rpc = HubClient(h)
        depth = 55
        data = "[" * depth + "[" + ",".join(["0"] * 450_000) + "]" + "]" * depth
        body = ('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":'
                '{"messageId":"deep","role":"ROLE_USER","parts":[{"data":%s}]}}}' % data)
        assert len(body) < 1024 ** 2                       # within limits.max_body_bytes
        SEEN_TEXTS.clear()
        payload = rpc.post(body).get_json()
        if "error" in payload:
            assert payload["error"]["code"] == -32602
        assert all(size <= 16 * 1024 ** 2 for size in SEEN_TEXTS), SEEN_TEXTS
    finally:
        close_hub(h)


# --- values nested past what an a2a-sdk client reads ---------------------------------

def _nested(levels: int):
    value = "x"
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


# An a2a-sdk client reads a task through protobuf's JSON parser, which stops at 100
# levels, two a JSON level: a data part nested past 47 levels (a metadata past 48), well
# inside limits.max_json_depth, was stored, and the task, every ListTasks page holding
# it and its stream were "Message too deep" to every client of the tenant.
@pytest.mark.parametrize("where", ["data", "metadata", "part metadata"])
def test_a_value_nested_past_what_an_a2a_sdk_client_reads_is_refused(rpc, where):
    def params(value):
        found = send_params("hi")
        message = found["message"]
        if where == "data":
            message["parts"].append({"data": value})
        elif where == "metadata":
            message["metadata"] = {"k": value}
        else:
            message["parts"][0]["metadata"] = {"k": value}
        return found

    response = rpc.call("SendMessage", params(_nested(50))).get_json()
    assert response.get("error", {}).get("code") == -32602, str(response)[:300]
    assert "nests deeper than 32 levels" in response["error"]["message"]
    _sdk_reads_list_tasks(rpc)
    fits = rpc.call("SendMessage", params(_nested(31))).get_json()   # 32 levels at most
    assert fits["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    _sdk_reads_list_tasks(rpc)


def test_a_parts_unknown_fields_are_not_stored(rpc):
    """A part's keys that a Part does not have are left out of the task's history, as a
    message's are: a strict ProtoJSON reader (protobuf's, which refuses an unknown field,
    as Go's protojson does by default) reads the task. Before, the part was stored as
    sent, and that reader refused every read of the task."""
    parts = [{"text": "hi", "bogus": {"x": 1}, "mediaType": "text/plain"},
             {"data": {"k": [1, 2]}, "extra": 5, "metadata": {"m": "v"}}]
    task = rpc.send("ignored", parts=parts)
    read = rpc.result("GetTask", {"id": task["id"]})
    assert read["history"][0]["parts"] == [
        {"text": "hi", "mediaType": "text/plain"},
        {"data": {"k": [1, 2]}, "metadata": {"m": "v"}}]
    json_format.Parse(json.dumps(read), a2a_pb2.Task())       # ParseError: unknown field
