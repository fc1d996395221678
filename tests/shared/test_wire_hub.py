"""The hub's readers in wire/: its message steps and its ListTasks, each refusal in order."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_wsgi.errors import DoorError
from murmur_wsgi.wire import message_hub
from murmur_wsgi.wire import params as wire_params
from murmur_wsgi.wire.message_hub import HUB_STEPS, read_hub_message
from murmur_wsgi.wire.params import read_history_length, read_hub_list_tasks


def _msg(**fields) -> dict:
    return {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}],
                        **fields}}


def _parts(*parts) -> dict:
    return _msg(parts=list(parts))


def _answer(read, params):
    try:
        read(params)
    except DoorError as ex:
        return ex.code, str(ex)
    return None


P = "Invalid params: "
ONE_KIND = "must be an object setting exactly one of text, raw, url and data"


@pytest.mark.parametrize("params, code, text", [
    ({}, -32602, P + "message is required"),
    ({"message": None}, -32602, P + "message must be an object"),
    ({"message": {"role": "ROLE_USER", "parts": []}}, -32602,
     P + "message.messageId must be a non-empty string"),
    ({"message": {"messageId": "", "role": "ROLE_AGENT"}}, -32602,
     P + "message.messageId must be a non-empty string"),
    ({"message": {"messageId": "m", "parts": [{"text": "x"}]}}, -32602,
     P + "message.role must be ROLE_USER"),
    ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}, -32602,
     P + "message.parts must be a non-empty array of parts"),
    # one part after the other: part 0's strings before part 1's kinds
    (_parts({"text": 5}, {"data": 1, "text": 1}), -32602,
     P + "message.parts[0].text must be a string"),
    (_parts({"text": "a"}, {"text": "a", "data": 1}), -32602, P + "message.parts[1] " + ONE_KIND),
    (_parts({"text": "a"}, 3), -32602, P + "message.parts[1] " + ONE_KIND),
    (_parts({"data": 1, "mediaType": None}), -32602,
     P + "message.parts[0].mediaType must be a string"),
    (_parts({"raw": "!!", "filename": 3}), -32602, P + "message.parts[0].filename must be a string"),
    (_parts({"raw": "!!"}), -32602, P + "message.parts[0].raw is not base64"),
    (_msg(taskId=5), -32602, P + "message.taskId must be a string"),
    (_msg(taskId="t", contextId=5), -32004,
     "this hub never asks for input, so a task cannot be continued: send the message "
     "without taskId (the same contextId continues the conversation)"),
    (_msg(contextId=5), -32602, P + "message.contextId must be a string"),
    (_msg(contextId="c" * 257), -32602, P + "message.contextId is longer than 256 bytes"),
    (_parts({"text": " "}, {"data": None}, {"raw": "aGk="}), -32602,
     P + "the message needs a non-empty text or data part; this hub does not read files"),
    ({**_msg(), "configuration": []}, -32602, P + "configuration must be an object"),
    ({**_msg(), "configuration": {"returnImmediately": 1, "historyLength": -1}}, -32602,
     P + "configuration.returnImmediately must be a boolean"),
    ({**_msg(), "configuration": {"historyLength": True}}, -32602,
     P + "configuration.historyLength must be a whole number, 0 or more"),
])
def test_hub_message_refusals(params, code, text):
    assert _answer(read_hub_message, params) == (code, text)


def test_hub_message_read():
    params = _parts({"text": "a"}, {"text": "  "}, {"data": {"k": 1}, "mediaType": "x/y"},
                    {"data": None})
    params["message"].update(contextId="", metadata={"a": 1})
    params["configuration"] = {"returnImmediately": None, "historyLength": 0,
                               "taskPushNotificationConfig": {"url": "u"}}
    msg = read_hub_message(params)
    assert (msg.message_id, msg.context_id, msg.return_immediately, msg.history_length,
            msg.push_config) == ("m", None, False, 0, {"url": "u"})
    assert msg.parts == [("text", "a"), ("data", {"k": 1}, "x/y", None)]
    assert msg.data == [{"k": 1}] and msg.message is params["message"]


def test_hub_steps_are_named_in_order():
    assert [name.split(":")[0] for name, _ in HUB_STEPS][:3] == [
        "params.message is an object", "messageId, role, parts (limits.max_parts)",
        "each part, in order"]


@pytest.mark.parametrize("params, text", [
    ({"contextId": None, "pageSize": 0}, P + "contextId must be a string"),
    ({"status": "X", "pageSize": 0}, P + "status must be a TASK_STATE_* name"),
    ({"pageSize": 101}, P + "pageSize must be from 1 to 100"),
    ({"pageSize": True}, P + "pageSize must be from 1 to 100"),
    ({"pageToken": 5, "historyLength": -1}, P + "pageToken must be a string"),
    ({"statusTimestampAfter": "yesterday"},
     "statusTimestampAfter must be an RFC 3339 timestamp, such as 2026-10-13T09:00:00Z"),
    ({"includeArtifacts": "yes"}, P + "includeArtifacts must be a boolean"),
    ({"historyLength": 1.0}, P + "historyLength must be a whole number, 0 or more"),
])
def test_hub_list_tasks_refusals(params, text):
    assert _answer(read_hub_list_tasks, params) == (-32602, text)


def test_hub_list_tasks_reads_null_as_absent():
    read = read_hub_list_tasks({"pageSize": None, "pageToken": None, "includeArtifacts": None,
                                "historyLength": None, "statusTimestampAfter": None,
                                "status": "TASK_STATE_UNSPECIFIED", "contextId": ""})
    assert (read.context_id, read.state, read.page_size, read.token, read.cutoff_us,
            read.include_artifacts, read.history_length) == (None, None, 50, None, None,
                                                            False, 100)
    read = read_hub_list_tasks({"pageToken": "abc", "pageSize": 100, "historyLength": 0,
                                "statusTimestampAfter": "1970-01-01T00:00:01Z"})
    assert (read.token, read.page_size, read.history_length, read.cutoff_us) == \
        ("abc", 100, 0, 1_000_000)


def test_history_length():
    assert read_history_length({}) is None and read_history_length({"historyLength": None}) is None
    assert read_history_length({"historyLength": 3}) == 3
    assert _answer(read_history_length, {"historyLength": -1}) == (
        -32602, P + "historyLength must be a whole number, 0 or more")


PROPERTY = settings(max_examples=400, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))
scalars = st.none() | st.booleans() | st.integers(-2, 3) | st.sampled_from(
    ["", " ", "a", "ROLE_USER", "text/csv", "aGk=", "!!", "é" * 70, "c" * 257])
values = st.recursive(scalars, lambda children: st.lists(children, max_size=3) | st.dictionaries(
    st.sampled_from(["a", "url"]), children, max_size=2), max_leaves=5)
good_parts = st.fixed_dictionaries({"text": st.sampled_from(["hi", " ", "", "é"])},
                                   optional={"mediaType": st.just("text/plain")}) \
    | st.fixed_dictionaries({"data": values}, optional={"filename": st.sampled_from(["f", 3]),
                                                        "mediaType": values})
any_parts = good_parts | values | st.dictionaries(
    st.sampled_from(["text", "raw", "url", "data", "mediaType", "filename"]), values, max_size=3)
messages = st.fixed_dictionaries({
    "messageId": st.sampled_from(["m1"] * 8 + ["", 5]),
    "role": st.sampled_from(["ROLE_USER"] * 8 + [None, "user"]),
    "parts": st.lists(good_parts, min_size=1, max_size=3) | st.lists(any_parts, max_size=4)
    | values,
}, optional={"taskId": scalars, "contextId": scalars, "metadata": values})
hub_params = st.fixed_dictionaries({}, optional={
    "message": messages | messages | values,
    "configuration": st.fixed_dictionaries({}, optional={
        "returnImmediately": values, "historyLength": values,
        "taskPushNotificationConfig": values}) | values,
})


def _outcome(read, params):
    try:
        return "read", read(params)
    except DoorError as ex:
        return "refused", ex.error_object()


@PROPERTY
@given(hub_params)
def test_the_hub_fast_path_answers_what_the_steps_answer(params):
    steps = _outcome(message_hub.read_hub_steps, params)
    fast = message_hub._fast_read(params)
    if fast is not None:
        assert steps == ("read", fast)
    assert _outcome(read_hub_message, params) == steps


def test_the_hub_fast_path_reads_the_usual_message():
    params = _parts({"text": "hi"}, {"data": {"a": 1}, "mediaType": "application/json"})
    params["configuration"] = {"returnImmediately": True, "historyLength": 2}
    fast = message_hub._fast_read(params)
    assert fast is not None and fast == message_hub.read_hub_steps(params)


def test_hub_list_tasks_without_its_fields_reads_as_the_schema_would():
    assert read_hub_list_tasks({"other": 1}) == wire_params._HUB_LIST_TASKS.load({})
