"""The door's client: a synchronous A2A v1.0 client on ``requests``.

>>> from murmur_wsgi.client import DoorClient
>>> with DoorClient("http://127.0.0.1:41873") as door:          # doctest: +SKIP
...     task = door.send("what is 2 + 2?")
...     for event in door.stream("/stream 3"):
...         print(event.kind, event.frame, event.text)

See ``docs/client.md``.
"""
from __future__ import annotations

from murmur_wsgi.client.door import DoorClient, door_url, user_message
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
from murmur_wsgi.client.streams import EventStream

__all__ = [
    "DoorClient", "EventStream", "StreamEvent", "door_url", "user_message",
    "artifact_text", "state_word", "status_text",
    "DoorError", "ConnectionFailed", "ConnectTimeout", "Timeout", "ReadTimeout",
    "StreamBroken", "ProtocolError", "HttpRefusal", "RpcError", "ParseError",
    "InvalidRequest", "MethodNotFound", "InvalidParams", "InternalError", "TaskNotFound",
    "TaskNotCancelable", "PushNotSupported", "UnsupportedOperation",
    "ContentTypeNotSupported", "InvalidAgentResponse", "ExtendedCardNotConfigured",
    "ExtensionSupportRequired", "VersionError", "CompletionMisaddressed",
    "CompletionNotAwaited",
]
