"""wire/message.py: the steps in the reference's order, and the fast path agreeing with them.

The fast path reads the common message in one pass; wherever it answers, the
steps (the schemas) must answer the same message, and wherever the steps refuse,
the fast path must decline. tests/shared/test_message.py pins every refusal's text.
"""
from __future__ import annotations

import base64

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_wsgi.errors import DoorError
from murmur_wsgi.door.manifest import load_manifest
from murmur_wsgi.uris import DOOR_URI
from murmur_wsgi.wire import message as wire_message

HTTP = load_manifest({"name": "a", "version": "1", "limits": {"max_parts": 4}})
PROCESS = load_manifest({"name": "a", "version": "1", "inference": {"transport": "process"},
                         "agent": {"process": ["cat"]}})
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 8).decode()
PROPERTY = settings(max_examples=400, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))

scalars = st.none() | st.booleans() | st.integers(-2, 3) | st.sampled_from(
    ["", "a", "ROLE_USER", "image/png", "text/plain", PNG, "tsk_1"])
values = st.recursive(scalars, lambda children: st.lists(children, max_size=3) | st.dictionaries(
    st.sampled_from(["a", "forgetSession", DOOR_URI]), children, max_size=2), max_leaves=5)
good_parts = st.fixed_dictionaries({"text": st.text(max_size=3)},
                                   optional={"mediaType": st.just("text/plain")}) \
    | st.fixed_dictionaries({"data": values}, optional={"filename": st.sampled_from(["f", 3])})
any_parts = good_parts | values | st.dictionaries(
    st.sampled_from(["text", "raw", "url", "data", "mediaType", "filename"]), values,
    max_size=3) | st.fixed_dictionaries({"raw": st.just(PNG), "mediaType": st.just("image/png")})
messages = st.fixed_dictionaries({
    "messageId": st.sampled_from(["m1"] * 8 + ["", 5]),
    "role": st.sampled_from(["ROLE_USER"] * 8 + [None, "user"]),
    "parts": st.lists(good_parts, min_size=1, max_size=3) | st.lists(any_parts, max_size=5)
    | values,
}, optional={
    "taskId": st.sampled_from(["", "tsk_1", None, 3]),
    "contextId": st.sampled_from(["", "ctx", None, 1]),
    "referenceTaskIds": st.lists(st.sampled_from(["a", "b", "", 3]), max_size=3) | values,
    "metadata": st.dictionaries(st.sampled_from([DOOR_URI, "k"]), st.fixed_dictionaries(
        {}, optional={"forgetSession": st.booleans() | values}) | values, max_size=2) | values,
})
params = st.fixed_dictionaries({}, optional={
    "message": messages | messages | values,
    "configuration": st.fixed_dictionaries({}, optional={
        "returnImmediately": values, "taskPushNotificationConfig": values}) | values,
})


def answer(read, p, manifest):
    try:
        return "read", read(p, manifest)
    except DoorError as ex:
        return "refused", ex.error_object()


@PROPERTY
@given(params, st.sampled_from([HTTP, PROCESS]))
def test_the_fast_path_answers_what_the_steps_answer(p, manifest):
    steps = answer(wire_message.read_steps, p, manifest)
    fast = wire_message._fast_read(p, manifest)
    if fast is not None:
        assert steps == ("read", fast)
    assert answer(wire_message.read_message, p, manifest) == steps


def test_the_fast_path_reads_the_usual_message():
    p = {"message": {"messageId": "m1", "role": "ROLE_USER", "contextId": "ctx_1",
                     "parts": [{"text": "hi"}, {"data": {"a": 1}, "mediaType": "application/json"}],
                     "metadata": {"k": 1}},
         "configuration": {"returnImmediately": True}}
    fast = wire_message._fast_read(p, HTTP)
    assert fast is not None
    assert fast == wire_message.read_steps(p, HTTP)


def test_the_steps_are_the_references_eleven_in_order():
    numbers = [int(name.split()[0]) for name, _ in wire_message.STEPS]
    assert numbers == list(range(1, 12))
