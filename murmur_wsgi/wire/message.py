"""Reading a SendMessage's params.message: the spec's eleven checks, in order."""
from __future__ import annotations

import binascii
import logging
from dataclasses import dataclass

from marshmallow import EXCLUDE, Schema, ValidationError, fields

from murmur_wsgi.errors import (ContentTypeNotSupportedError, InvalidParamsError,
                                PushNotificationNotSupportedError)
from murmur_wsgi.uris import DOOR_URI

logger = logging.getLogger(__name__)

MAX_REFERENCES = 16
PART_KINDS = ("text", "raw", "url", "data")
PART_STRINGS = ("text", "raw", "url", "mediaType", "filename")
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_ABSENT = object()
_META_PATH = f'message.metadata["{DOOR_URI}"]'
_READS = "this agent reads text parts, data parts and image raw parts only"


@dataclass(slots=True)
class IncomingMessage:
    """A message the door has read in full; nothing in it is refused.

    ``parts`` holds, in order, ``("text", str)``, ``("data", value,
    media_type | None, filename | None)`` and ``("image", bytes, media_type)``.
    """

    message_id: str
    task_id: str | None                 # None: starts a task ("" names none)
    context_id: str | None              # None: the door gives the task a fresh ctx_…
    parts: list
    reference_task_ids: list[str]       # each id once, in first-occurrence order
    forget_session: bool
    return_immediately: bool
    images: list[tuple[str, bytes]]     # (media_type, bytes), in part order
    text_parts_bytes: int               # UTF-8 bytes of the text parts
    door_extension: bool                # metadata holds the door URI: echo it in A2A-Extensions


class _StrictBoolean(fields.Boolean):
    """A JSON true or false; 1, "true" and null are refused."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class DoorExtensionSchema(Schema):
    """The object under the door URI in message.metadata; other keys are ignored."""

    class Meta:
        unknown = EXCLUDE

    forget_session = _StrictBoolean(data_key="forgetSession", load_default=False)


_DOOR_EXTENSION = DoorExtensionSchema()


def _invalid(what: str) -> InvalidParamsError:
    return InvalidParamsError(f"Invalid params: {what}")


def _is_image_of(media_type: str, data: bytes) -> bool:
    """Tell whether ``data`` starts with the magic bytes of ``media_type``."""
    if media_type == "image/png":
        return data.startswith(b"\x89PNG\r\n\x1a\n")
    if media_type == "image/jpeg":
        return data.startswith(b"\xff\xd8\xff")
    if media_type == "image/gif":
        return data.startswith((b"GIF87a", b"GIF89a"))
    return data[:4] == b"RIFF" and data[8:12] == b"WEBP"       # image/webp


def _image_type(part: dict) -> str | None:
    """Return the image type a raw part declares (lowercased), or None."""
    declared = part.get("mediaType")
    if not declared:
        return None
    # NOTE: media types match case-insensitively (RFC 6838); parameters are not accepted.
    lowered = declared.lower()
    return lowered if lowered in IMAGE_TYPES else None


def read_message(params: dict, manifest) -> IncomingMessage:
    """Read params of SendMessage/SendStreamingMessage, or raise the first refusal.

    Runs the spec's checks 1-11 in order; every refusal comes before a
    task is looked up or started. ``params`` is the already-checked object.

    Raises:
        InvalidParamsError: steps 1-7, 10 and 11 (-32602).
        ContentTypeNotSupportedError: step 8 (-32005).
        PushNotificationNotSupportedError: step 9 (-32003).
    """
    # NOTE: "present" means the key is there; null is a present value that is not a
    # string/object/boolean, except where the spec names null as "not set"
    # (data, returnImmediately, taskPushNotificationConfig, configuration, metadata).

    # step 1: params.message is an object (a bare message as params is refused)
    msg = params.get("message", _ABSENT)
    if msg is _ABSENT:
        raise _invalid("message is required; params holds the Message under message")
    if not isinstance(msg, dict):
        raise _invalid("message must be an object")

    # step 2: messageId, role, then parts
    message_id = msg.get("messageId", _ABSENT)
    if message_id is _ABSENT:
        raise _invalid("message.messageId is required")
    if not isinstance(message_id, str) or not message_id:
        raise _invalid("message.messageId must be a non-empty string")
    role = msg.get("role", _ABSENT)
    if role is _ABSENT:
        raise _invalid("message.role is required")
    if role != "ROLE_USER":
        raise _invalid("message.role must be ROLE_USER: a message to this agent is from the user")
    parts = msg.get("parts", _ABSENT)
    if parts is _ABSENT:
        raise _invalid("message.parts is required")
    if not isinstance(parts, list) or not parts:
        raise _invalid("message.parts must be a non-empty array of parts")
    max_parts = manifest.limits["max_parts"]
    if len(parts) > max_parts:                          # before any part is looked at
        raise _invalid(f"message.parts holds {len(parts)} parts, more than "
                       f"limits.max_parts ({max_parts})")
    for i, part in enumerate(parts):
        if not isinstance(part, dict):
            raise _invalid(f"message.parts[{i}] must be an object")

    # step 3: every part sets exactly one of text, raw, url and data
    kinds = []
    for i, part in enumerate(parts):
        found = [key for key in PART_KINDS if key in part]
        if len(found) != 1:
            sets = " and ".join(found) if found else "none of them"
            raise _invalid(f"message.parts[{i}] must set exactly one of text, raw, url and data; "
                           f"it sets {sets}")
        kinds.append(found[0])

    # step 4: text, raw, url, mediaType and filename are strings where present
    for i, part in enumerate(parts):
        for key in PART_STRINGS:
            if key in part and not isinstance(part[key], str):
                raise _invalid(f"message.parts[{i}].{key} must be a string")

    # step 5: taskId and contextId, then referenceTaskIds
    task_id = msg.get("taskId")
    if "taskId" in msg and not isinstance(task_id, str):
        raise _invalid("message.taskId must be a string")
    task_id = task_id or None                          # "" names none
    context_id = msg.get("contextId")
    if "contextId" in msg and not isinstance(context_id, str):
        raise _invalid("message.contextId must be a string")
    context_id = context_id or None                    # "" is proto3's unset value
    references: list[str] = []
    if "referenceTaskIds" in msg:
        given = msg["referenceTaskIds"]
        if not isinstance(given, list):
            raise _invalid("message.referenceTaskIds must be an array of task ids")
        for i, ref in enumerate(given):
            if not isinstance(ref, str) or not ref:
                raise _invalid(f"message.referenceTaskIds[{i}] must be a non-empty string")
        references = list(dict.fromkeys(given))
        if len(references) > MAX_REFERENCES:
            raise _invalid(f"message.referenceTaskIds names {len(references)} distinct tasks; "
                           f"at most {MAX_REFERENCES}")

    # step 6: the door extension's key in metadata, then its forgetSession
    metadata = msg.get("metadata")
    door_extension = isinstance(metadata, dict) and DOOR_URI in metadata
    forget_session = False
    if door_extension:
        block = metadata[DOOR_URI]
        if not isinstance(block, dict):
            raise _invalid(f"{_META_PATH} must be an object")
        try:
            forget_session = _DOOR_EXTENSION.load(block)["forget_session"]
        except ValidationError:
            raise _invalid(f"{_META_PATH}.forgetSession must be a boolean") from None
        if forget_session and task_id is not None:
            raise _invalid("forgetSession starts a new conversation, so it goes on a message "
                           f"that starts a task, not on one that continues task {task_id}")

    # step 7: configuration.returnImmediately is a boolean when present and not null
    config = params.get("configuration")
    if config is None:
        config = {}                                    # absent or null: no configuration
    elif not isinstance(config, dict):
        # NOTE: the spec leaves this open. A configuration that is not an object cannot be
        # read as a SendMessageConfiguration, and "a message the door cannot read in full"
        # is -32602; it is answered here, the first check that reads configuration.
        raise _invalid("configuration must be an object")
    return_immediately = config.get("returnImmediately")
    if return_immediately is None:
        return_immediately = False
    elif not isinstance(return_immediately, bool):
        raise InvalidParamsError("configuration.returnImmediately must be a boolean")

    # step 8: the first url part, or raw part that is not an image: -32005
    for i, kind in enumerate(kinds):
        if kind == "url" or (kind == "raw" and _image_type(parts[i]) is None):
            what = "a url part" if kind == "url" else "a raw part that is not an image"
            declared = parts[i].get("mediaType")
            extra = {"mediaType": declared} if declared else {}
            raise ContentTypeNotSupportedError(f"message.parts[{i}] is {what}; {_READS}",
                                               partIndex=str(i), **extra)

    # step 9: configuration.taskPushNotificationConfig present and not null: -32003
    if config.get("taskPushNotificationConfig") is not None:
        raise PushNotificationNotSupportedError()

    # step 10: forgetSession: true needs inference.transport: process
    transport = manifest.transport
    if forget_session and transport != "process":
        raise InvalidParamsError("forgetSession asks this capsule to forget the harness session "
                                 "this context names, and only a capsule on "
                                 "inference.transport: process has one")

    # step 11: the image parts, in order; each refusal names its part
    images: list[tuple[str, bytes]] = []
    if "raw" in kinds:
        limits = manifest.context["images"]
        for i, kind in enumerate(kinds):
            if kind != "raw":
                continue
            media_type = _image_type(parts[i])
            where = f"message.parts[{i}]"
            try:
                data = binascii.a2b_base64(parts[i]["raw"], strict_mode=True)
            except ValueError:                          # binascii.Error, or non-ASCII text
                raise _invalid(f"{where}.raw is not base64") from None
            if not _is_image_of(media_type, data):
                raise _invalid(f"{where} is not an image of its mediaType: its first bytes "
                               f"are not those of {media_type}")
            if len(data) > limits["max_bytes"]:
                raise _invalid(f"{where} is {len(data)} bytes, larger than "
                               f"context.images.max_bytes ({limits['max_bytes']})")
            if len(images) >= limits["max_per_turn"]:
                raise _invalid(f"{where} is image {len(images) + 1} of this message, one more "
                               f"than context.images.max_per_turn ({limits['max_per_turn']})")
            if task_id is not None:
                raise _invalid(f"{where} is an image on a message that continues task "
                               f"{task_id}; images go on the message that starts a task")
            if transport == "process":
                raise _invalid(f"{where} is an image, and this capsule runs on "
                               "inference.transport: process, whose harness takes no images "
                               "from the door")
            images.append((media_type, data))

    # Read in full: normalise the parts for the task.
    normal: list = []
    text_bytes = 0
    next_image = iter(images)
    for part, kind in zip(parts, kinds):
        if kind == "text":
            text = part["text"]
            # PERF: len(str) is the byte count for ASCII text; encode only when it is not.
            text_bytes += len(text) if text.isascii() else len(
                text.encode("utf-8", "surrogatepass"))
            normal.append(("text", text))
        elif kind == "data":
            normal.append(("data", part["data"], part.get("mediaType") or None,
                           part.get("filename") or None))
        else:
            media_type, data = next(next_image)
            normal.append(("image", data, media_type))
    return IncomingMessage(message_id, task_id, context_id, normal, references, forget_session,
                           return_immediately, images, text_bytes, door_extension)


def completion_received(delegation_id: str, context_id: str) -> dict:
    """The answer to a completion: a ROLE_AGENT message saying it was received."""
    return {"message": {"messageId": f"msg_{delegation_id}_received", "contextId": context_id,
                        "role": "ROLE_AGENT",
                        "parts": [{"data": {"delegation_id": delegation_id, "received": True},
                                   "mediaType": "application/json"}]}}
