"""A message and its parts: SendMessage's params read in the spec's order, and the door's messages.

``read_message`` runs the spec's eleven checks as ``STEPS``, a list of named
steps in the reference's order; the first refusal answers. Each step that reads
a shape does it with a schema (``ParamsSchema``, ``MessageHeadSchema``,
``PartFieldsSchema`` (wire/parts.py), ``MessageIdsSchema``, ``DoorExtensionSchema``,
``ConfigurationSchema``); the steps about this door (content types, push,
transport, images) are rules on what the shapes read.

PERF: a schema load costs microseconds, and SendMessage is the door's hot path
(the whole read is ~2 µs). ``_fast_read`` reads the common message (text and
data parts, ids, metadata without the door's key, a plain configuration) in one
pass and declines anything else, which the steps then read. A property test
(tests/shared/test_wire_message.py) checks that the two agree wherever the fast path answers.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from marshmallow import ValidationError

from murmur_wsgi.errors import (ContentTypeNotSupportedError, InvalidParamsError,
                                PushNotificationNotSupportedError)
from murmur_wsgi.uris import DOOR_URI
from murmur_wsgi.wire import message_shapes as shapes
from murmur_wsgi.wire.base import invalid, load
from murmur_wsgi.wire.parts import (PART_KINDS, decode_raw, fast_head, fast_kind, image_type,
                                    is_image_of, part_field_refusal)

logger = logging.getLogger(__name__)

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
    # The message object as sent, read in full (the agent's typed ``ctx.message`` is built
    # from it); not compared: two reads of one message are equal whatever object they read.
    source: dict | None = field(default=None, compare=False, repr=False)


# --- the steps, in the reference's order ----------------------------------------------------


class _Reading:
    """What the steps have read so far."""

    __slots__ = ("params", "manifest", "msg", "parts", "kinds", "message_id", "task_id",
                 "context_id", "references", "door_extension", "forget_session", "config",
                 "return_immediately", "images")

    def __init__(self, params: dict, manifest):
        self.params = params
        self.manifest = manifest
        self.references: list[str] = []
        self.door_extension = False
        self.forget_session = False
        self.images: list[tuple[str, bytes]] = []


def _message(r: _Reading) -> None:
    r.msg = load(shapes.PARAMS, r.params)["message"]


def _head(r: _Reading) -> None:
    head = load(shapes.HEAD, r.msg)
    r.message_id, parts = head["message_id"], head["parts"]
    max_parts = r.manifest.limits["max_parts"]
    if len(parts) > max_parts:                          # before any part is looked at
        raise invalid(f"message.parts holds {len(parts)} parts, more than "
                      f"limits.max_parts ({max_parts})")
    for i, part in enumerate(parts):
        if not isinstance(part, dict):
            raise invalid(f"message.parts[{i}] must be an object")
    r.parts = parts


def _part_kinds(r: _Reading) -> None:
    kinds = []
    for i, part in enumerate(r.parts):
        found = [key for key in PART_KINDS if key in part]
        if len(found) != 1:
            sets = " and ".join(found) if found else "none of them"
            raise invalid(f"message.parts[{i}] must set exactly one of text, raw, url and data; "
                          f"it sets {sets}")
        kinds.append(found[0])
    r.kinds = kinds


def _part_fields(r: _Reading) -> None:
    for i, part in enumerate(r.parts):
        refusal = part_field_refusal(i, part)
        if refusal is not None:
            raise refusal


def _ids(r: _Reading) -> None:
    ids = load(shapes.IDS, r.msg)
    r.task_id = ids["task_id"] or None                 # "" names none
    r.context_id = ids["context_id"] or None           # "" is proto3's unset value
    r.references = ids["reference_task_ids"]


def _door_extension(r: _Reading) -> None:
    metadata = r.msg.get("metadata")
    r.door_extension = isinstance(metadata, dict) and DOOR_URI in metadata
    if not r.door_extension:
        return
    block = metadata[DOOR_URI]
    if not isinstance(block, dict):
        raise invalid(f"{_META_PATH} must be an object")
    try:
        r.forget_session = shapes.DOOR_EXTENSION.load(block)["forget_session"]
    except ValidationError:
        raise invalid(f"{_META_PATH}.forgetSession must be a boolean") from None
    if r.forget_session and r.task_id is not None:
        raise invalid("forgetSession starts a new conversation, so it goes on a message "
                      f"that starts a task, not on one that continues task {r.task_id}")


def _configuration(r: _Reading) -> None:
    config = r.params.get("configuration")
    if config is None:
        config = {}                                    # absent or null: no configuration
    elif not isinstance(config, dict):
        # NOTE: the spec leaves this open. A configuration that is not an object cannot be
        # read as a SendMessageConfiguration, and "a message the door cannot read in full"
        # is -32602; it is answered here, the first check that reads configuration.
        raise invalid("configuration must be an object")
    r.config = load(shapes.CONFIGURATION, config)
    r.return_immediately = bool(r.config["return_immediately"])


def _content_types(r: _Reading) -> None:
    for i, kind in enumerate(r.kinds):
        if kind == "url" or (kind == "raw" and image_type(r.parts[i]) is None):
            what = "a url part" if kind == "url" else "a raw part that is not an image"
            declared = r.parts[i].get("mediaType")
            extra = {"mediaType": declared} if declared else {}
            raise ContentTypeNotSupportedError(f"message.parts[{i}] is {what}; {_READS}",
                                               partIndex=str(i), **extra)


def _push_config(r: _Reading) -> None:
    if r.config["push_config"] is not None:
        raise PushNotificationNotSupportedError()


def _forget_transport(r: _Reading) -> None:
    if r.forget_session and r.manifest.transport != "process":
        raise InvalidParamsError("forgetSession asks this capsule to forget the harness session "
                                 "this context names, and only a capsule on "
                                 "inference.transport: process has one")


def _images(r: _Reading) -> None:
    if "raw" not in r.kinds:
        return
    limits = r.manifest.context["images"]
    images = r.images
    for i, kind in enumerate(r.kinds):
        if kind != "raw":
            continue
        media_type = image_type(r.parts[i])
        where = f"message.parts[{i}]"
        data = decode_raw(i, r.parts[i]["raw"])
        if not is_image_of(media_type, data):
            raise invalid(f"{where} is not an image of its mediaType: its first bytes "
                          f"are not those of {media_type}")
        if len(data) > limits["max_bytes"]:
            raise invalid(f"{where} is {len(data)} bytes, larger than "
                          f"context.images.max_bytes ({limits['max_bytes']})")
        if len(images) >= limits["max_per_turn"]:
            raise invalid(f"{where} is image {len(images) + 1} of this message, one more "
                          f"than context.images.max_per_turn ({limits['max_per_turn']})")
        if r.task_id is not None:
            raise invalid(f"{where} is an image on a message that continues task "
                          f"{r.task_id}; images go on the message that starts a task")
        if r.manifest.transport == "process":
            raise invalid(f"{where} is an image, and this capsule runs on "
                          "inference.transport: process, whose harness takes no images "
                          "from the door")
        images.append((media_type, data))


# The spec's checks 1-11 ("Reading a message"), in its order: the first refusal answers,
# and every refusal comes before a task is looked up or started.
STEPS = (
    ("1 params.message is an object", _message),
    ("2 messageId, role, parts (limits.max_parts; each part an object)", _head),
    ("3 each part sets exactly one of text, raw, url, data", _part_kinds),
    ("4 a part's text, raw, url, mediaType, filename are strings", _part_fields),
    ("5 taskId, contextId, then referenceTaskIds", _ids),
    ("6 the door extension's metadata, then forgetSession", _door_extension),
    ("7 configuration.returnImmediately", _configuration),
    ("8 url parts and raw parts that are not images: -32005", _content_types),
    ("9 configuration.taskPushNotificationConfig: -32003", _push_config),
    ("10 forgetSession needs inference.transport: process", _forget_transport),
    ("11 the image parts, in order", _images),
)


def _normal_parts(parts: list, kinds: list, images: list) -> tuple[list, int]:
    """The parts as the task holds them, and the UTF-8 bytes of the text parts."""
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
    return normal, text_bytes


def read_steps(params: dict, manifest) -> IncomingMessage:
    """Run ``STEPS`` in order on SendMessage's params; the first refusal is raised."""
    r = _Reading(params, manifest)
    for _name, step in STEPS:
        step(r)
    normal, text_bytes = _normal_parts(r.parts, r.kinds, r.images)
    return IncomingMessage(r.message_id, r.task_id, r.context_id, normal, r.references,
                           r.forget_session, r.return_immediately, r.images, text_bytes,
                           r.door_extension, r.msg)


def _fast_read(params: dict, manifest) -> IncomingMessage | None:
    """The common message read in one pass, or None for ``read_steps`` to read.

    Accepts only what every step accepts with nothing to do: text and data
    parts, string ids, no referenceTaskIds, metadata without the door's key,
    and a configuration without a push config. Anything else is declined.
    """
    head = fast_head(params)
    if head is None:
        return None
    msg, message_id, parts = head
    if len(parts) > manifest.limits["max_parts"] or "referenceTaskIds" in msg:
        return None
    kinds = []
    for part in parts:
        kind = fast_kind(part)
        if kind is None:
            return None
        kinds.append(kind)
    task_id = msg.get("taskId")
    context_id = msg.get("contextId")
    if ("taskId" in msg and type(task_id) is not str) \
            or ("contextId" in msg and type(context_id) is not str):
        return None
    metadata = msg.get("metadata")
    if type(metadata) is dict and DOOR_URI in metadata:
        return None
    config = params.get("configuration")
    return_immediately = False
    if config is not None:
        if type(config) is not dict or config.get("taskPushNotificationConfig") is not None:
            return None
        return_immediately = config.get("returnImmediately")
        if return_immediately is None:
            return_immediately = False
        elif type(return_immediately) is not bool:
            return None
    normal, text_bytes = _normal_parts(parts, kinds, ())
    return IncomingMessage(message_id, task_id or None, context_id or None, normal, [], False,
                           return_immediately, [], text_bytes, False, msg)


def read_message(params: dict, manifest) -> IncomingMessage:
    """Read params of SendMessage/SendStreamingMessage, or raise the first refusal.

    Runs the spec's checks 1-11 in order (``STEPS``); every refusal comes before
    a task is looked up or started. ``params`` is the already-checked object.
    ``manifest`` gives ``limits.max_parts``, ``context.images`` and ``transport``.

    Raises:
        InvalidParamsError: steps 1-7, 10 and 11 (-32602).
        ContentTypeNotSupportedError: step 8 (-32005).
        PushNotificationNotSupportedError: step 9 (-32003).
    """
    # NOTE: "present" means the key is there; null is a present value that is not a
    # string/object/boolean, except where the spec names null as "not set"
    # (data, returnImmediately, taskPushNotificationConfig, configuration, metadata).
    message = _fast_read(params, manifest)
    return message if message is not None else read_steps(params, manifest)


def completion_received(delegation_id: str, context_id: str) -> dict:
    """The answer to a completion: a ROLE_AGENT message saying it was received."""
    return {"message": {"messageId": f"msg_{delegation_id}_received", "contextId": context_id,
                        "role": "ROLE_AGENT",
                        "parts": [{"data": {"delegation_id": delegation_id, "received": True},
                                   "mediaType": "application/json"}]}}
