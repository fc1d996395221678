"""The message checks of "Messages", "Parts" and "Image parts" at the wire.

``tests/shared/test_message.py`` holds every check's exact answer, and the answer of a
message breaking two of them; here each of those messages is sent to a door, as
SendMessage and as SendStreamingMessage, and the whole answer is compared: HTTP 200, one
``application/json`` JSON-RPC body, key by key, no ``A2A-Extensions``, and nothing
started (no task held, no event published). A refused message comes before the door
looks up a task: the ``taskId`` these messages name was never held, yet the check answers.
"""
from __future__ import annotations

import base64
import json

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.uris import STREAM_URI
from tests.conftest import Rpc
from tests.shared.test_message import CASES, HTTP, PNG, PRECEDENCE, PROCESS, SMALL

METHODS = ["SendMessage", "SendStreamingMessage"]
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


@pytest.fixture(scope="module")
def doors():
    """One door per manifest the cases name: a refused message changes none of them."""
    made = {id(manifest): create_app(manifest) for manifest in (HTTP, PROCESS, SMALL)}
    yield made
    for door in made.values():
        door.close()


def ordered(value):
    return json.loads(json.dumps(value), object_pairs_hook=list)


def assert_refused(door, method, params, error):
    response = Rpc(door).call(method, params, {"A2A-Extensions": STREAM_URI}, request_id=9)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Content-Length"] == str(len(response.data))
    assert "A2A-Extensions" not in response.headers
    assert json.loads(response.data, object_pairs_hook=list) == ordered(
        {"jsonrpc": "2.0", "id": 9, "error": error})
    assert len(door.session.store) == 0 and door.session.ring.last_id == 0


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("p, manifest, expected", CASES + PRECEDENCE)
def test_every_message_check_answers_exactly_at_the_wire(doors, method, p, manifest, expected):
    assert_refused(doors[id(manifest)], method, p, expected)


def message(*parts, **extra) -> dict:
    return {"message": {"messageId": "m", "role": "ROLE_USER", "parts": list(parts), **extra}}


@pytest.mark.parametrize("method", METHODS)
def test_the_references_content_type_example(doors, method):
    # "Errors": the -32005 example, message and metadata as the reference writes them.
    params = message({"text": "summarise"},
                     {"url": "https://example.com/a.pdf", "mediaType": "application/pdf"})
    assert_refused(doors[id(HTTP)], method, params, {
        "code": -32005,
        "message": "message.parts[1] is a url part; this agent reads text parts, data parts "
                   "and image raw parts only",
        "data": [{"@type": ERROR_INFO, "reason": "CONTENT_TYPE_NOT_SUPPORTED",
                  "domain": "a2a-protocol.org",
                  "metadata": {"partIndex": "1", "mediaType": "application/pdf"}}]})


@pytest.mark.parametrize("method", METHODS)
def test_the_references_push_example(doors, method):
    # "Push notifications": a message asking for push, once read, before any task starts.
    params = dict(message({"text": "hi"}),
                  configuration={"taskPushNotificationConfig": {"url": "https://example.com"}})
    assert_refused(doors[id(HTTP)], method, params, {
        "code": -32003, "message": "push notifications are not supported by this agent",
        "data": [{"@type": ERROR_INFO, "reason": "PUSH_NOTIFICATION_NOT_SUPPORTED",
                  "domain": "a2a-protocol.org", "metadata": {}}]})


def test_a_message_of_images_only_starts_a_task():
    seen = []

    def agent(ctx):
        seen.append((ctx.text, ctx.images))
        return "seen"

    door = create_app({"name": "a", "version": "1"}, agent=agent)
    try:
        raw = base64.b64encode(PNG).decode()
        task = Rpc(door).result("SendMessage", message({"raw": raw, "mediaType": "image/png"}))
        assert task["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert seen == [("<untrusted-content source=task:event>\n\n</untrusted-content>",
                         [("image/png", PNG)])]
    finally:
        door.close()


def test_a_text_part_is_read_whatever_its_media_type():
    door = create_app({"name": "a", "version": "1"}, agent=lambda ctx: ctx.text)
    try:
        parts = [{"text": "one", "mediaType": "image/png"},
                 {"text": "two", "mediaType": "application/pdf", "filename": "x.pdf"}]
        task = Rpc(door).result("SendMessage", message(*parts))["task"]
        assert task["artifacts"][0]["parts"][0]["text"] == (
            "<untrusted-content source=task:event>\none\ntwo\n</untrusted-content>")
    finally:
        door.close()
