"""Reading SendMessage's params on the hub: the text's request limits, in order.

Checked before admission, so a refused message runs and costs nothing.
"""
from __future__ import annotations

import binascii
import logging
from dataclasses import dataclass

from murmur_wsgi.errors import InvalidParamsError, UnsupportedOperationError
from murmur_wsgi.tasks.render import data_block

logger = logging.getLogger(__name__)

MAX_CONTEXT_ID_BYTES = 256
PART_KINDS = ("text", "raw", "url", "data")
_ABSENT = object()


@dataclass(slots=True)
class HubMessage:
    message_id: str
    context_id: str | None
    text: str                       # text parts joined by newlines, data parts fenced
    data: list                      # the data parts' values, in order
    message: dict                   # the message as sent (what the task's history holds)
    return_immediately: bool
    history_length: int | None
    push_config: dict | None = None       # configuration.taskPushNotificationConfig, unread


def _invalid(what: str) -> InvalidParamsError:
    return InvalidParamsError(f"Invalid params: {what}")


def history_length(params: dict, where: str = "historyLength") -> int | None:
    value = params.get("historyLength")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _invalid(f"{where} must be a whole number, 0 or more")
    return value


def read_message(params: dict) -> HubMessage:
    """Read params of SendMessage/SendStreamingMessage, or raise the first refusal."""
    msg = params.get("message", _ABSENT)
    if msg is _ABSENT:
        raise _invalid("message is required")
    if not isinstance(msg, dict):
        raise _invalid("message must be an object")
    message_id = msg.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise _invalid("message.messageId must be a non-empty string")
    if msg.get("role") != "ROLE_USER":
        raise _invalid("message.role must be ROLE_USER")
    parts = msg.get("parts")
    if not isinstance(parts, list) or not parts:
        raise _invalid("message.parts must be a non-empty array of parts")
    for i, part in enumerate(parts):
        if not isinstance(part, dict) or sum(key in part for key in PART_KINDS) != 1:
            raise _invalid(f"message.parts[{i}] must be an object setting exactly one of "
                           "text, raw, url and data")
        for key in ("text", "raw", "url", "mediaType", "filename"):
            if key in part and not isinstance(part[key], str):
                raise _invalid(f"message.parts[{i}].{key} must be a string")
        if "raw" in part:
            try:
                binascii.a2b_base64(part["raw"], strict_mode=True)
            except ValueError:
                raise _invalid(f"message.parts[{i}].raw is not base64") from None
    task_id = msg.get("taskId")
    if task_id is not None and not isinstance(task_id, str):
        raise _invalid("message.taskId must be a string")
    if task_id:
        raise UnsupportedOperationError(
            "this hub never asks for input, so a task cannot be continued: send the message "
            "without taskId (the same contextId continues the conversation)", taskId=task_id)
    context_id = msg.get("contextId")
    if context_id is not None and not isinstance(context_id, str):
        raise _invalid("message.contextId must be a string")
    context_id = context_id or None
    if context_id is not None and len(context_id.encode("utf-8", "surrogatepass")) > \
            MAX_CONTEXT_ID_BYTES:
        raise _invalid(f"message.contextId is longer than {MAX_CONTEXT_ID_BYTES} bytes")
    pieces, data = [], []
    for part in parts:
        if "text" in part and part["text"].strip():
            pieces.append(part["text"])
        elif "data" in part and part["data"] is not None:
            data.append(part["data"])
            pieces.append(data_block(part["data"], part.get("mediaType") or None,
                                     part.get("filename") or None))
    if not pieces:
        raise _invalid("the message needs a non-empty text or data part; this hub does not "
                       "read files")
    config = params.get("configuration")
    if config is None:
        config = {}
    elif not isinstance(config, dict):
        raise _invalid("configuration must be an object")
    immediately = config.get("returnImmediately")
    if immediately is None:
        immediately = False
    elif not isinstance(immediately, bool):
        raise _invalid("configuration.returnImmediately must be a boolean")
    length = history_length(config, "configuration.historyLength")
    return HubMessage(message_id, context_id, "\n".join(pieces), data, msg, immediately, length,
                      config.get("taskPushNotificationConfig"))


def stored_message(msg: dict, task_id: str, context_id: str) -> dict:
    """The message as the task's history holds it: its ids filled in, proto field order."""
    out = {"messageId": msg["messageId"], "contextId": context_id, "taskId": task_id,
           "role": "ROLE_USER", "parts": msg["parts"]}
    for key in ("metadata", "extensions", "referenceTaskIds"):
        if msg.get(key):
            out[key] = msg[key]
    return out
