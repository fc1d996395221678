"""One client for every A2A v1.0 server, synchronous, on ``requests``.

>>> from murmur_wsgi.client import A2AClient
>>> with A2AClient("http://127.0.0.1:41873") as door:          # doctest: +SKIP
...     task = door.send("what is 2 + 2?")
...     for event in door.stream("/stream 3"):
...         print(event.kind, event.frame, event.text)
>>> echo = A2AClient("http://127.0.0.1:41880/a2a/v1/agents/echo",   # doctest: +SKIP
...                  api_key="mhk_dev-acme-change-me")

See ``docs/client.md``.
"""
from __future__ import annotations

from murmur_wsgi.client.errors import (CompletionMisaddressed, CompletionNotAwaited,
                                       ConnectionFailed, ConnectTimeout,
                                       ContentTypeNotSupported, DoorError,
                                       ExtendedCardNotConfigured, ExtensionSupportRequired,
                                       HttpRefusal, InternalError, InvalidAgentResponse, InvalidParams, InvalidRequest,
                                       MethodNotFound, ParseError, ProtocolError,
                                       PushNotSupported, ReadTimeout, RpcError, StreamBroken,
                                       TaskNotCancelable, TaskNotFound, Timeout,
                                       UnsupportedOperation, VersionError)
from murmur_wsgi.client.events import StreamEvent, artifact_text, state_word, status_text

# PERF: the clients and their streams (``requests``, urllib3, http.client: about 0.1 s)
# are imported when first named, so a command that serves (``murmur-wsgi serve``, whose
# parser lists the client's commands too) does not load them.
_LAZY = {"A2AClient": "agent", "DoorClient": "agent", "door_url": "agent",
         "user_message": "agent", "EventStream": "streams", "new_session": "deadline",
         "DeadlineAdapter": "deadline"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

__all__ = [
    "A2AClient", "DoorClient", "EventStream", "StreamEvent", "door_url", "user_message",
    "new_session", "DeadlineAdapter",
    "artifact_text", "state_word", "status_text",
    "DoorError", "ConnectionFailed", "ConnectTimeout", "Timeout", "ReadTimeout",
    "StreamBroken", "ProtocolError", "HttpRefusal", "RpcError", "ParseError",
    "InvalidRequest", "MethodNotFound", "InvalidParams", "InternalError", "TaskNotFound",
    "TaskNotCancelable", "PushNotSupported", "UnsupportedOperation",
    "ContentTypeNotSupported", "InvalidAgentResponse", "ExtendedCardNotConfigured",
    "ExtensionSupportRequired", "VersionError", "CompletionMisaddressed",
    "CompletionNotAwaited",
]
