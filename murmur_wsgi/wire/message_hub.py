"""The hub's variant of a message: SendMessage's params read by its rules, and the stored message.

The hub reads a message by the second system's request limits, not the door's
checklist (``wire/message.py``): ``HUB_STEPS`` names its checks in their order,
and the first refusal answers; the common message is read in one pass first
(``_fast_read``, which declines anything else; tests/shared/test_wire_hub.py checks it
agrees with the steps). They run before admission, so a refused message
runs and costs nothing. A part is checked as the door checks one
(``wire/parts.py``), one part after the other; what differs from the door: a
continued task is -32004 (the hub never asks for input), a contextId has at most
``MAX_CONTEXT_ID_BYTES``, the agent reads only text and data, and the
configuration carries ``historyLength``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from marshmallow import fields, validate

from murmur_wsgi.errors import UnsupportedOperationError
from murmur_wsgi.wire.base import (NonEmptyList, ObjectField, Present, StrictBoolean,
                                   StrictString, WireSchema, invalid, load, refusals)
from murmur_wsgi.wire.depth import MAX_VALUE_DEPTH, nests_deeper
from murmur_wsgi.wire.params import history_length_field
from murmur_wsgi.wire.encode import compact_utf8
from murmur_wsgi.wire.parts import (PART_KEYS, PART_KINDS, decode_raw, fast_head, fast_kind,
                                    part_field_refusal)

logger = logging.getLogger(__name__)

MAX_CONTEXT_ID_BYTES = 256
CONTINUED = ("this hub never asks for input, so a task cannot be continued: send the message "
             "without taskId (the same contextId continues the conversation)")


@dataclass(slots=True)
class HubMessage:
    message_id: str
    context_id: str | None
    # What the agent reads, in order: ("text", str) for each text part that is not blank,
    # ("data", value, media_type | None, filename | None) for each data part not null.
    parts: list
    data: list                      # the data parts' values, in order
    message: dict                   # the message as sent (what the task's history holds)
    return_immediately: bool
    history_length: int | None
    push_config: dict | None = None       # configuration.taskPushNotificationConfig, unread


def _same(text: str) -> dict:
    return refusals(text, text)


class HubParamsSchema(WireSchema):
    message = ObjectField(required=True, error_messages=refusals(
        "Invalid params: message is required", "Invalid params: message must be an object"))


_ID_TEXT = "Invalid params: message.messageId must be a non-empty string"
_ROLE_TEXT = "Invalid params: message.role must be ROLE_USER"


class HubMessageHeadSchema(WireSchema):
    """messageId, role, then parts: every refusal of a field answers one text."""

    message_id = StrictString(_ID_TEXT, data_key="messageId", required=True,
                              validate=validate.Length(min=1, error=_ID_TEXT))
    role = fields.Raw(data_key="role", required=True, error_messages=_same(_ROLE_TEXT),
                      validate=validate.Equal("ROLE_USER", error=_ROLE_TEXT))
    parts = NonEmptyList(data_key="parts", required=True, error_messages=_same(
        "Invalid params: message.parts must be a non-empty array of parts"))


class HubConfigurationSchema(WireSchema):
    """configuration: returnImmediately, then historyLength (null reads as absent)."""

    return_immediately = StrictBoolean(
        "Invalid params: configuration.returnImmediately must be a boolean",
        data_key="returnImmediately", load_default=None, allow_none=True)
    history_length = history_length_field("configuration.historyLength")
    push_config = Present(data_key="taskPushNotificationConfig", load_default=None)


_PARAMS = HubParamsSchema()
_HEAD = HubMessageHeadSchema()
_CONFIGURATION = HubConfigurationSchema()


MAX_PARTS = 1_000               # limits.max_parts' default


class _Reading:
    __slots__ = ("params", "max_parts", "msg", "message_id", "parts", "context_id", "read",
                 "data", "config")

    def __init__(self, params: dict, max_parts: int):
        self.params = params
        self.max_parts = max_parts


def _message(r: _Reading) -> None:
    r.msg = load(_PARAMS, r.params)["message"]


def _head(r: _Reading) -> None:
    head = load(_HEAD, r.msg)
    r.message_id, r.parts = head["message_id"], head["parts"]
    if len(r.parts) > r.max_parts:                      # before any part is looked at
        raise invalid(f"message.parts holds {len(r.parts)} parts, more than "
                      f"limits.max_parts ({r.max_parts})")


def _parts(r: _Reading) -> None:
    for i, part in enumerate(r.parts):
        if not isinstance(part, dict) or sum(key in part for key in PART_KINDS) != 1:
            raise invalid(f"message.parts[{i}] must be an object setting exactly one of "
                          "text, raw, url and data")
        refusal = part_field_refusal(i, part)
        if refusal is not None:
            raise refusal
        if "raw" in part:
            decode_raw(i, part["raw"])


def _task_id(r: _Reading) -> None:
    task_id = r.msg.get("taskId")
    if task_id is not None and not isinstance(task_id, str):
        raise invalid("message.taskId must be a string")
    if task_id:
        raise UnsupportedOperationError(CONTINUED, taskId=task_id)


def _context_id(r: _Reading) -> None:
    context_id = r.msg.get("contextId")
    if context_id is not None and not isinstance(context_id, str):
        raise invalid("message.contextId must be a string")
    r.context_id = context_id or None
    if r.context_id is not None and len(r.context_id.encode("utf-8", "surrogatepass")) > \
            MAX_CONTEXT_ID_BYTES:
        raise invalid(f"message.contextId is longer than {MAX_CONTEXT_ID_BYTES} bytes")


def _something_to_read(read: list) -> bool:
    """Whether the parts read hold a non-empty one: a text (a blank one is never read), or
    a data part whose value is not ``{}``, ``[]`` nor a blank string (a number or a boolean
    is a value). The empty ones beside it are read as they are."""
    for entry in read:
        if entry[0] == "text":
            return True
        value = entry[1]
        if value.strip() if isinstance(value, str) else \
                not isinstance(value, (dict, list)) or value:
            return True
    return False


def _readable(r: _Reading) -> None:
    """The parts the agent reads, of which at least one "non-empty text or data part" (the
    Nexus A2A server text), else -32602."""
    r.read, r.data = [], []
    for part in r.parts:
        if "text" in part and part["text"].strip():
            r.read.append(("text", part["text"]))
        elif "data" in part and part["data"] is not None:
            r.data.append(part["data"])
            r.read.append(("data", part["data"], part.get("mediaType") or None,
                           part.get("filename") or None))
    if not _something_to_read(r.read):
        raise invalid("the message needs a non-empty text or data part; this hub does not "
                      "read files")


def extras_refusal(msg: dict):
    """-32602 unless what the task's history keeps as sent is of its proto type (the
    door's rules): message.metadata and each part's an object, extensions and
    referenceTaskIds arrays of strings (null reads as absent), and each data part's
    value and each metadata at most ``MAX_VALUE_DEPTH`` levels deep; else None."""
    if msg.get("metadata") is not None and type(msg["metadata"]) is not dict:
        return invalid("message.metadata must be an object")
    for key in ("extensions", "referenceTaskIds"):
        found = msg.get(key)
        if found is not None and (type(found) is not list
                                  or any(type(item) is not str for item in found)):
            return invalid(f"message.{key} must be an array of strings")
    for i, part in enumerate(msg["parts"]):
        if part.get("metadata") is not None and type(part["metadata"]) is not dict:
            return invalid(f"message.parts[{i}].metadata must be an object")
    deep = _too_deep(msg)
    if deep is not None:
        return invalid(f"{deep} nests deeper than {MAX_VALUE_DEPTH} levels of objects and "
                       "arrays")
    return None


def _too_deep(msg: dict) -> str | None:
    """The first value of ``msg`` the history keeps that nests past ``MAX_VALUE_DEPTH``.

    PERF: an absent value (most: a text part's data, its metadata) is not looked at: no
    call (about 700 instructions each, three a message of one text part)."""
    found = msg.get("metadata")
    if found is not None and nests_deeper(found, MAX_VALUE_DEPTH):
        return "message.metadata"
    for i, part in enumerate(msg["parts"]):
        for key in ("data", "metadata"):
            found = part.get(key)
            if found is not None and nests_deeper(found, MAX_VALUE_DEPTH):
                return f"message.parts[{i}].{key}"
    return None


def _extras(r: _Reading) -> None:
    refusal = extras_refusal(r.msg)
    if refusal is not None:
        raise refusal


def _configuration(r: _Reading) -> None:
    config = r.params.get("configuration")
    if config is None:
        config = {}
    elif not isinstance(config, dict):
        raise invalid("configuration must be an object")
    r.config = load(_CONFIGURATION, config)


# The hub's checks of a message (the second system's request limits), in order.
HUB_STEPS = (
    ("params.message is an object", _message),
    ("messageId, role, parts (limits.max_parts)", _head),
    ("each part, in order: one kind, its strings, raw as base64", _parts),
    ("taskId: a string, and none given (-32004)", _task_id),
    ("contextId: a string of at most MAX_CONTEXT_ID_BYTES", _context_id),
    ("a text or data part the agent can read", _readable),
    ("metadata, extensions, referenceTaskIds, each part's metadata: their types; the "
     "values kept at most MAX_VALUE_DEPTH deep", _extras),
    ("configuration: returnImmediately, historyLength", _configuration),
)


def _fast_read(params: dict, max_parts: int = MAX_PARTS) -> HubMessage | None:
    """The common message read in one pass, or None for ``read_hub_steps`` to read.

    PERF: the steps' loads cost ~20 µs a message, the hub's SendMessage ~200 µs.
    Accepts only what every step accepts: text and data parts with string fields,
    no taskId, a short contextId, a plain configuration. Anything else is declined.
    """
    head = fast_head(params)
    if head is None:
        return None
    msg, message_id, parts = head
    if msg.get("taskId") or len(parts) > max_parts:
        return None
    read, data = [], []
    for part in parts:
        kind = fast_kind(part)
        if kind == "text":
            if part["text"].strip():
                read.append(("text", part["text"]))
        elif kind == "data":
            if part["data"] is not None:
                data.append(part["data"])
                read.append(("data", part["data"], part.get("mediaType") or None,
                             part.get("filename") or None))
        else:
            return None
    task_id, context_id = msg.get("taskId"), msg.get("contextId")
    if not _something_to_read(read) or (task_id is not None and type(task_id) is not str) \
            or (context_id is not None and (type(context_id) is not str
                                            or len(context_id) > _FAST_CONTEXT_CHARS)):
        return None
    if extras_refusal(msg) is not None:
        return None
    config = params.get("configuration")
    if config is None:
        return HubMessage(message_id, context_id or None, read, data, msg, False, None)
    if type(config) is not dict:
        return None
    immediately, length = config.get("returnImmediately"), config.get("historyLength")
    if (immediately is not None and type(immediately) is not bool) or (
            length is not None and (type(length) is not int or length < 0)):
        return None
    return HubMessage(message_id, context_id or None, read, data, msg, bool(immediately), length,
                      config.get("taskPushNotificationConfig"))


_FAST_CONTEXT_CHARS = MAX_CONTEXT_ID_BYTES // 4      # so short its UTF-8 bytes cannot exceed it


def read_hub_message(params: dict, max_parts: int = MAX_PARTS) -> HubMessage:
    """Read the hub's SendMessage/SendStreamingMessage params, or raise the first refusal."""
    message = _fast_read(params, max_parts)
    return message if message is not None else read_hub_steps(params, max_parts)


def read_hub_steps(params: dict, max_parts: int = MAX_PARTS) -> HubMessage:
    """Run ``HUB_STEPS`` in order on SendMessage's params; the first refusal is raised."""
    r = _Reading(params, max_parts)
    for _name, step in HUB_STEPS:
        step(r)
    config = r.config
    return HubMessage(r.message_id, r.context_id, r.read, r.data, r.msg,
                      bool(config["return_immediately"]), config["history_length"],
                      config["push_config"])


def _known(part: dict) -> dict:
    """``part`` without the keys a Part does not have (a strict ProtoJSON reader, which
    refuses an unknown field, reads every stored task)."""
    return part if part.keys() <= PART_KEYS else \
        {key: value for key, value in part.items() if key in PART_KEYS}


def stored_message(msg: dict, task_id: str, context_id: str) -> dict:
    """The message as the task's history holds it: its ids filled in, proto field order,
    and only the fields a Message and its Parts have."""
    out = {"messageId": msg["messageId"], "contextId": context_id, "taskId": task_id,
           "role": "ROLE_USER", "parts": [_known(part) for part in msg["parts"]]}
    for key in ("metadata", "extensions", "referenceTaskIds"):
        if msg.get(key):
            out[key] = msg[key]
    return out


def stored_head(message_id: str, context_id: str, task_id: str) -> str:
    """How ``stored_message``'s JSON (``compact_utf8``'s) begins: its ids, in its order."""
    return (f'{{"messageId":{compact_utf8(message_id)},"contextId":{compact_utf8(context_id)},'
            f'"taskId":{compact_utf8(task_id)},')
