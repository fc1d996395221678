"""Where each method of the hub carries ids a client chooses, and their cap in bytes.

Every id a client sends may become a key of the hub's store (``msg:<messageId>``)
or be echoed in an answer or a log line, so each is at most ``limits.max_id_bytes``
bytes of UTF-8 (256 by default; the Nexus A2A server text fixes 256 for a
message's ``contextId``, which ``wire/message_hub.py`` keeps whatever the
setting). A longer one is -32602 naming the field, before the method reads
its params: ``Invalid params: message.messageId is longer than 256 bytes``. A
value that is not a string is left to the method's reader, which refuses it.

The JSON-RPC ``id`` itself is echoed in the answer and in every event of a stream: a
string id longer than the cap is -32600 with ``id: null`` (it is not echoed). Unbounded,
a 900 KB id made a SubscribeToTask of a task of 10,000 events a 9 GB answer.
"""
from __future__ import annotations

import logging

from murmur_wsgi.errors import InvalidRequestError
from murmur_wsgi.wire.base import invalid
from murmur_wsgi.wire.encode import utf8_bytes

logger = logging.getLogger(__name__)

EACH = "[]"                 # a path step: every item of a list

_MESSAGE_IDS = (("message", "messageId"), ("message", "contextId"), ("message", "taskId"),
                ("message", "referenceTaskIds", EACH),
                ("configuration", "taskPushNotificationConfig", "id"),
                ("configuration", "taskPushNotificationConfig", "taskId"))
_TASK_ID = (("id",),)
_CONFIG_IDS = (("taskId",), ("id",))

ID_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "SendMessage": _MESSAGE_IDS,
    "SendStreamingMessage": _MESSAGE_IDS,
    "GetTask": _TASK_ID,
    "CancelTask": _TASK_ID,
    "SubscribeToTask": _TASK_ID,
    "ListTasks": (("contextId",),),
    "CreateTaskPushNotificationConfig": _CONFIG_IDS,
    "GetTaskPushNotificationConfig": _CONFIG_IDS,
    "DeleteTaskPushNotificationConfig": _CONFIG_IDS,
    "ListTaskPushNotificationConfigs": (("taskId",),),
}
"""Each method's id fields, as paths from its params."""


def check_id_bytes(method: str, params: dict, max_bytes: int) -> None:
    """Raise -32602 for the first id of ``method``'s ``params`` longer than ``max_bytes``."""
    for path in ID_FIELDS.get(method, ()):
        value = params
        for step, key in enumerate(path):
            if key == EACH:
                if type(value) is list:
                    for i, item in enumerate(value):
                        _check(item, f"{'.'.join(path[:step])}[{i}]", max_bytes)
                break
            if type(value) is not dict:
                break
            value = value.get(key)
        else:
            _check(value, ".".join(path), max_bytes)


def check_request_id(request_id: str, max_bytes: int) -> None:
    """Raise -32600 with ``id: null`` when the JSON-RPC id (a string) passes ``max_bytes``."""
    if utf8_bytes(request_id) > max_bytes:
        error = InvalidRequestError(
            f"Invalid Request: the JSON-RPC id is longer than {max_bytes} bytes")
        error.request_id = None
        raise error


def _check(value, where: str, max_bytes: int) -> None:
    # PERF: a string of at most a quarter of the cap in characters cannot pass it.
    if type(value) is str and len(value) * 4 > max_bytes and utf8_bytes(value) > max_bytes:
        raise invalid(f"{where} is longer than {max_bytes} bytes")
