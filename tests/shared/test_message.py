"""read_message: the spec's eleven message checks, their order and their answers."""
from __future__ import annotations

import base64
import copy

import pytest

from murmur_wsgi.errors import (ContentTypeNotSupportedError, InvalidParamsError,
                                PushNotificationNotSupportedError)
from murmur_wsgi.door.manifest import load_manifest
from murmur_wsgi.uris import DOOR_URI
from murmur_wsgi.wire.message import IncomingMessage, read_message

HTTP = load_manifest({"name": "a", "version": "1"})
PROCESS = load_manifest({"name": "a", "version": "1", "inference": {"transport": "process"},
                         "agent": {"process": ["cat"]}})
SMALL = load_manifest({"name": "a", "version": "1",
                       "context": {"images": {"max_bytes": 64, "max_per_turn": 2}}})

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 8
JPEG = b"\xff\xd8\xff\xe0" + b"\0" * 8
GIF = b"GIF89a" + b"\0" * 8
WEBP = b"RIFF\x10\0\0\0WEBPVP8 "
META = f'message.metadata["{DOOR_URI}"]'
READS = "this agent reads text parts, data parts and image raw parts only"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image(data: bytes = PNG, media_type: str = "image/png") -> dict:
    return {"raw": b64(data), "mediaType": media_type}


def params(*parts, configuration=None, **fields) -> dict:
    """SendMessage params with one valid message; ``fields`` override its members."""
    message = {"messageId": "msg-1", "role": "ROLE_USER",
               "parts": list(parts) or [{"text": "hello"}]}
    for key, value in fields.items():
        if value is DROP:
            message.pop(key, None)
        else:
            message[key] = value
    out = {"message": message}
    if configuration is not None:
        out["configuration"] = configuration
    return out


DROP = object()


def forget(value=True) -> dict:
    return {DOOR_URI: {"forgetSession": value}}


def invalid(what: str) -> dict:
    return InvalidParamsError(f"Invalid params: {what}").error_object()


def refused(p: dict, manifest=HTTP) -> dict:
    with pytest.raises((InvalidParamsError, ContentTypeNotSupportedError,
                        PushNotificationNotSupportedError)) as info:
        read_message(p, manifest)
    return info.value.error_object()


PUSH = PushNotificationNotSupportedError().error_object()
NOT_PROCESS = InvalidParamsError(
    "forgetSession asks this capsule to forget the harness session this context names, and "
    "only a capsule on inference.transport: process has one").error_object()


def content_type(i: int, what: str, **meta) -> dict:
    return ContentTypeNotSupportedError(f"message.parts[{i}] is {what}; {READS}",
                                        partIndex=str(i), **meta).error_object()


# --- each check, with its exact answer ---------------------------------------------------

CASES = [
    # step 1
    pytest.param({}, HTTP, invalid("message is required; params holds the Message under message"),
                 id="1-message-absent"),
    pytest.param(params()["message"], HTTP,
                 invalid("message is required; params holds the Message under message"),
                 id="1-bare-message"),
    pytest.param({"message": [1]}, HTTP, invalid("message must be an object"), id="1-array"),
    pytest.param({"message": None}, HTTP, invalid("message must be an object"), id="1-null"),
    # step 2
    pytest.param(params(messageId=DROP), HTTP, invalid("message.messageId is required"),
                 id="2-messageId-absent"),
    pytest.param(params(messageId=""), HTTP,
                 invalid("message.messageId must be a non-empty string"), id="2-messageId-empty"),
    pytest.param(params(messageId=7), HTTP,
                 invalid("message.messageId must be a non-empty string"), id="2-messageId-int"),
    pytest.param(params(role=DROP), HTTP, invalid("message.role is required"), id="2-role-absent"),
    *[pytest.param(params(role=role), HTTP,
                   invalid("message.role must be ROLE_USER: a message to this agent is from "
                           "the user"), id=f"2-role-{role}")
      for role in ("user", "ROLE_AGENT", "role_user", None)],
    pytest.param(params(parts=DROP), HTTP, invalid("message.parts is required"),
                 id="2-parts-absent"),
    pytest.param(params(parts=[]), HTTP,
                 invalid("message.parts must be a non-empty array of parts"), id="2-parts-empty"),
    pytest.param(params(parts={"text": "a"}), HTTP,
                 invalid("message.parts must be a non-empty array of parts"), id="2-parts-object"),
    pytest.param(params({"text": "a"}, "b"), HTTP, invalid("message.parts[1] must be an object"),
                 id="2-part-string"),
    # step 3
    pytest.param(params({"text": "a"}, {}), HTTP,
                 invalid("message.parts[1] must set exactly one of text, raw, url and data; "
                         "it sets none of them"), id="3-none"),
    pytest.param(params({"text": "a", "raw": "b"}), HTTP,
                 invalid("message.parts[0] must set exactly one of text, raw, url and data; "
                         "it sets text and raw"), id="3-two"),
    pytest.param(params({"text": "a", "data": None}), HTTP,
                 invalid("message.parts[0] must set exactly one of text, raw, url and data; "
                         "it sets text and data"), id="3-data-null-counts"),
    pytest.param(params({"mediaType": "text/plain"}), HTTP,
                 invalid("message.parts[0] must set exactly one of text, raw, url and data; "
                         "it sets none of them"), id="3-mediaType-only"),
    # step 4
    pytest.param(params({"text": "a"}, {"text": "b"}, {"text": 3}), HTTP,
                 invalid("message.parts[2].text must be a string"), id="4-text"),
    pytest.param(params({"text": None}), HTTP, invalid("message.parts[0].text must be a string"),
                 id="4-text-null"),
    pytest.param(params({"raw": 1}), HTTP, invalid("message.parts[0].raw must be a string"),
                 id="4-raw"),
    pytest.param(params({"url": []}), HTTP, invalid("message.parts[0].url must be a string"),
                 id="4-url"),
    pytest.param(params({"data": 1, "mediaType": 2}), HTTP,
                 invalid("message.parts[0].mediaType must be a string"), id="4-mediaType"),
    pytest.param(params({"text": "a", "filename": False}), HTTP,
                 invalid("message.parts[0].filename must be a string"), id="4-filename"),
    # step 5
    pytest.param(params(taskId=5), HTTP, invalid("message.taskId must be a string"),
                 id="5-taskId"),
    pytest.param(params(taskId=None), HTTP, invalid("message.taskId must be a string"),
                 id="5-taskId-null"),
    pytest.param(params(contextId={}), HTTP, invalid("message.contextId must be a string"),
                 id="5-contextId"),
    pytest.param(params(referenceTaskIds="tsk_a"), HTTP,
                 invalid("message.referenceTaskIds must be an array of task ids"),
                 id="5-refs-string"),
    pytest.param(params(referenceTaskIds=["tsk_a", ""]), HTTP,
                 invalid("message.referenceTaskIds[1] must be a non-empty string"),
                 id="5-refs-empty-id"),
    pytest.param(params(referenceTaskIds=["tsk_a", 3]), HTTP,
                 invalid("message.referenceTaskIds[1] must be a non-empty string"),
                 id="5-refs-int"),
    pytest.param(params(referenceTaskIds=[f"t{i}" for i in range(17)]), HTTP,
                 invalid("message.referenceTaskIds names 17 distinct tasks; at most 16"),
                 id="5-refs-17"),
    # step 6
    pytest.param(params(metadata={DOOR_URI: True}), HTTP, invalid(f"{META} must be an object"),
                 id="6-uri-not-object"),
    pytest.param(params(metadata={DOOR_URI: None}), HTTP, invalid(f"{META} must be an object"),
                 id="6-uri-null"),
    *[pytest.param(params(metadata=forget(value)), PROCESS,
                   invalid(f"{META}.forgetSession must be a boolean"), id=f"6-forget-{value!r}")
      for value in ("true", 1, 0, None, {})],
    pytest.param(params(metadata=forget(), taskId="tsk_1"), PROCESS,
                 invalid("forgetSession starts a new conversation, so it goes on a message that "
                         "starts a task, not on one that continues task tsk_1"),
                 id="6-forget-taskId"),
    # step 7
    *[pytest.param(params(configuration={"returnImmediately": value}), HTTP,
                   InvalidParamsError("configuration.returnImmediately must be a boolean").error_object(),
                   id=f"7-return-{value!r}")
      for value in ("true", 1, 0, [], {})],
    pytest.param(params(configuration=[]), HTTP, invalid("configuration must be an object"),
                 id="7-configuration-array"),
    # step 8
    pytest.param(params({"text": "a"}, {"url": "https://x/y.pdf", "mediaType": "application/pdf"}),
                 HTTP, content_type(1, "a url part", mediaType="application/pdf"), id="8-url"),
    pytest.param(params({"url": "https://x/y.png"}), HTTP, content_type(0, "a url part"),
                 id="8-url-no-type"),
    pytest.param(params({"url": "https://x/y.png", "mediaType": "image/png"}), HTTP,
                 content_type(0, "a url part", mediaType="image/png"), id="8-url-image"),
    pytest.param(params({"text": "a"}, {"raw": "JVBERg==", "mediaType": "application/pdf"}), HTTP,
                 content_type(1, "a raw part that is not an image", mediaType="application/pdf"),
                 id="8-raw-pdf"),
    pytest.param(params({"raw": "AAAA"}), HTTP, content_type(0, "a raw part that is not an image"),
                 id="8-raw-no-type"),
    pytest.param(params({"raw": "AAAA", "mediaType": ""}), HTTP,
                 content_type(0, "a raw part that is not an image"), id="8-raw-empty-type"),
    pytest.param(params({"raw": b64(PNG), "mediaType": "image/svg+xml"}), HTTP,
                 content_type(0, "a raw part that is not an image", mediaType="image/svg+xml"),
                 id="8-raw-svg"),
    # step 9
    pytest.param(params(configuration={"taskPushNotificationConfig": {"url": "https://x"}}),
                 HTTP, PUSH, id="9-push"),
    pytest.param(params(configuration={"taskPushNotificationConfig": {}}), HTTP, PUSH,
                 id="9-push-empty-object"),
    # step 10
    pytest.param(params(metadata=forget()), HTTP, NOT_PROCESS, id="10-forget-http"),
    # step 11
    pytest.param(params({"text": "a"}, {"raw": "not base64!", "mediaType": "image/png"}), HTTP,
                 invalid("message.parts[1].raw is not base64"), id="11-base64"),
    pytest.param(params({"raw": "iVBORw0KGgo", "mediaType": "image/png"}), HTTP,
                 invalid("message.parts[0].raw is not base64"), id="11-base64-padding"),
    pytest.param(params({"raw": b64(PNG) + "\n", "mediaType": "image/png"}), HTTP,
                 invalid("message.parts[0].raw is not base64"), id="11-base64-newline"),
    pytest.param(params({"raw": "é", "mediaType": "image/png"}), HTTP,
                 invalid("message.parts[0].raw is not base64"), id="11-base64-non-ascii"),
    *[pytest.param(params(image(data, media_type)), HTTP,
                   invalid("message.parts[0] is not an image of its mediaType: its first bytes "
                           f"are not those of {media_type}"), id=f"11-magic-{media_type}")
      for data, media_type in ((JPEG, "image/png"), (PNG, "image/jpeg"), (b"GIF88a", "image/gif"),
                               (b"RIFF\0\0\0\0WAVE", "image/webp"), (b"", "image/png"))],
    pytest.param(params(image(PNG + b"\0" * 49)), SMALL,
                 invalid("message.parts[0] is 65 bytes, larger than context.images.max_bytes "
                         "(64)"), id="11-max-bytes"),
    pytest.param(params(image(), image(GIF, "image/gif"), {"text": "a"}, image()), SMALL,
                 invalid("message.parts[3] is image 3 of this message, one more than "
                         "context.images.max_per_turn (2)"), id="11-max-per-turn"),
    pytest.param(params(image(), taskId="tsk_1"), HTTP,
                 invalid("message.parts[0] is an image on a message that continues task tsk_1; "
                         "images go on the message that starts a task"), id="11-taskId"),
    pytest.param(params({"text": "a"}, image()), PROCESS,
                 invalid("message.parts[1] is an image, and this capsule runs on "
                         "inference.transport: process, whose harness takes no images from the "
                         "door"), id="11-process"),
]


@pytest.mark.parametrize("p, manifest, expected", CASES)
def test_each_check_answers_exactly(p, manifest, expected):
    assert refused(p, manifest) == expected


def test_max_per_turn_zero_refuses_the_first_image():
    zero = load_manifest({"name": "a", "version": "1", "context": {"images": {"max_per_turn": 0}}})
    assert refused(params(image()), zero) == invalid(
        "message.parts[0] is image 1 of this message, one more than "
        "context.images.max_per_turn (0)")


def test_exactly_max_bytes_is_accepted():
    data = PNG + b"\0" * (64 - len(PNG))
    assert read_message(params(image(data)), SMALL).images == [("image/png", data)]


# --- precedence: a message breaking two checks gets the earlier one's answer ------------

PRECEDENCE = [
    pytest.param({"messageId": 5, "parts": [{"text": 1, "raw": 2}]}, HTTP,
                 invalid("message is required; params holds the Message under message"), id="1<2"),
    pytest.param(params({"text": "a", "raw": "b"}, messageId=""), HTTP,
                 invalid("message.messageId must be a non-empty string"), id="2<3"),
    pytest.param(params({"text": "a"}, role="user", messageId=""), HTTP,
                 invalid("message.messageId must be a non-empty string"), id="2:messageId<role"),
    pytest.param(params(role="user", parts=[]), HTTP,
                 invalid("message.role must be ROLE_USER: a message to this agent is from "
                         "the user"), id="2:role<parts"),
    pytest.param(params({"text": 5}, {"text": "a", "url": "b"}), HTTP,
                 invalid("message.parts[1] must set exactly one of text, raw, url and data; "
                         "it sets text and url"), id="3<4-across-parts"),
    pytest.param(params({"text": 5}, taskId=5), HTTP,
                 invalid("message.parts[0].text must be a string"), id="4<5"),
    pytest.param(params({"text": "a", "mediaType": 1, "filename": 2}), HTTP,
                 invalid("message.parts[0].mediaType must be a string"),
                 id="4:mediaType<filename"),
    pytest.param(params(taskId=5, contextId=5, referenceTaskIds=5), HTTP,
                 invalid("message.taskId must be a string"), id="5:taskId<contextId"),
    pytest.param(params(contextId=5, referenceTaskIds=5), HTTP,
                 invalid("message.contextId must be a string"), id="5:contextId<refs"),
    pytest.param(params(referenceTaskIds=[""] + [f"t{i}" for i in range(20)]), HTTP,
                 invalid("message.referenceTaskIds[0] must be a non-empty string"),
                 id="5:ids<count"),
    pytest.param(params(referenceTaskIds=5, metadata={DOOR_URI: 1}), HTTP,
                 invalid("message.referenceTaskIds must be an array of task ids"), id="5<6"),
    pytest.param(params(metadata={DOOR_URI: 1}, configuration={"returnImmediately": 1}), HTTP,
                 invalid(f"{META} must be an object"), id="6<7"),
    pytest.param(params(metadata=forget(), taskId="tsk_9", configuration={"returnImmediately": 1}),
                 HTTP, invalid("forgetSession starts a new conversation, so it goes on a message "
                               "that starts a task, not on one that continues task tsk_9"),
                 id="6:taskId<7<10"),
    pytest.param(params({"url": "u"}, configuration={"returnImmediately": "yes"}), HTTP,
                 InvalidParamsError("configuration.returnImmediately must be a boolean").error_object(), id="7<8"),
    pytest.param(params({"url": "u"},
                        configuration={"taskPushNotificationConfig": {"url": "https://x"}}),
                 HTTP, content_type(0, "a url part"), id="8<9"),
    pytest.param(params(image(), {"raw": "AAAA"}, {"url": "u"}), HTTP,
                 content_type(1, "a raw part that is not an image"), id="8:first-part"),
    pytest.param(params(metadata=forget(),
                        configuration={"taskPushNotificationConfig": {"url": "https://x"}}),
                 HTTP, PUSH, id="9<10"),
    pytest.param(params({"raw": "!!", "mediaType": "image/png"}, metadata=forget()), HTTP,
                 NOT_PROCESS, id="10<11"),
    pytest.param(params(image(JPEG), {"raw": "!!", "mediaType": "image/png"}), HTTP,
                 invalid("message.parts[0] is not an image of its mediaType: its first bytes are "
                         "not those of image/png"), id="11:parts-in-order"),
    pytest.param(params({"raw": "!!", "mediaType": "image/png"}, taskId="tsk_1"), PROCESS,
                 invalid("message.parts[0].raw is not base64"), id="11:base64<taskId<process"),
    pytest.param(params(image(PNG + b"\0" * 60), image(), image(), taskId="tsk_1"), SMALL,
                 invalid("message.parts[0] is 76 bytes, larger than context.images.max_bytes "
                         "(64)"), id="11:max_bytes<taskId"),
    pytest.param(params(image(), taskId="tsk_1"), PROCESS,
                 invalid("message.parts[0] is an image on a message that continues task tsk_1; "
                         "images go on the message that starts a task"), id="11:taskId<process"),
]


@pytest.mark.parametrize("p, manifest, expected", PRECEDENCE)
def test_the_earlier_check_answers(p, manifest, expected):
    assert refused(p, manifest) == expected


def test_a_refusal_leaves_params_unchanged():
    p = params(image(), {"url": "u"}, referenceTaskIds=["a", "a"])
    before = copy.deepcopy(p)
    refused(p)
    assert p == before


# --- what a message read in full gives ---------------------------------------------------


def test_minimal_message():
    got = read_message(params(), HTTP)
    assert got == IncomingMessage(message_id="msg-1", task_id=None, context_id=None,
                                  parts=[("text", "hello")], reference_task_ids=[],
                                  forget_session=False, return_immediately=False, images=[],
                                  text_parts_bytes=5, door_extension=False)
    assert not hasattr(got, "__dict__")


def test_full_message_is_normalised():
    images = [(PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")]
    p = params({"text": "héllo", "mediaType": "text/markdown", "filename": "a.md",
                "metadata": {"x": 1}},
               {"data": None},
               {"data": {"a": [1, 2]}, "mediaType": "application/json", "filename": "a.json"},
               *[image(data, media_type) for data, media_type in images],
               {"data": "x", "mediaType": "", "filename": ""},
               taskId="", contextId="ctx_1", referenceTaskIds=["b", "a", "b", "c", "a"],
               metadata={DOOR_URI: {"forgetSession": False, "other": 1}, "x": "y"},
               extensions=[DOOR_URI], unknownField=1,
               configuration={"returnImmediately": True, "taskPushNotificationConfig": None,
                              "acceptedOutputModes": ["text/plain"]})
    got = read_message(p, HTTP)
    assert got.task_id is None
    assert got.context_id == "ctx_1"
    assert got.reference_task_ids == ["b", "a", "c"]
    assert got.forget_session is False and got.door_extension is True
    assert got.return_immediately is True
    assert got.images == [(mt, data) for data, mt in images]
    assert got.parts == [("text", "héllo"), ("data", None, None, None),
                         ("data", {"a": [1, 2]}, "application/json", "a.json"),
                         *[("image", data, mt) for data, mt in images],
                         ("data", "x", None, None)]
    assert got.text_parts_bytes == len("héllo".encode())


def test_image_media_type_matches_in_any_case():
    got = read_message(params(image(PNG, "IMAGE/PNG")), HTTP)
    assert got.images == [("image/png", PNG)] and got.parts == [("image", PNG, "image/png")]


def test_images_only_message_is_read():
    assert read_message(params(image()), HTTP).parts == [("image", PNG, "image/png")]


@pytest.mark.parametrize("configuration", [None, {}, {"returnImmediately": None},
                                           {"returnImmediately": False}])
def test_return_immediately_defaults_to_false(configuration):
    p = params()
    p["configuration"] = configuration
    assert read_message(p, HTTP).return_immediately is False


@pytest.mark.parametrize("metadata", [None, "x", [DOOR_URI], {}, {"other": {"forgetSession": 1}},
                                      {DOOR_URI: {}}, {DOOR_URI: {"forgetSession": False}}])
def test_metadata_that_asks_nothing(metadata):
    got = read_message(params(metadata=metadata), HTTP)
    assert got.forget_session is False
    assert got.door_extension == (isinstance(metadata, dict) and DOOR_URI in metadata)


def test_forget_session_on_process_capsule():
    got = read_message(params(metadata=forget(), taskId=""), PROCESS)
    assert got.forget_session is True and got.task_id is None


def test_forget_false_with_task_id_is_accepted():
    got = read_message(params(metadata=forget(False), taskId="tsk_1"), HTTP)
    assert got.task_id == "tsk_1" and got.forget_session is False


def test_sixteen_distinct_references_with_repeats():
    ids = [f"t{i}" for i in range(16)]
    got = read_message(params(referenceTaskIds=ids + ids[::-1]), HTTP)
    assert got.reference_task_ids == ids


def test_lone_surrogate_text_is_counted():
    assert read_message(params({"text": "a\ud800"}), HTTP).text_parts_bytes == 4
