"""The client's errors: one hierarchy, shaped after ``requests.exceptions``.

Every error carries ``.request`` and ``.response`` (the ``requests`` objects,
``None`` when there was none) and ``.url``, the door's address, so a caller
can always say which door refused or could not be reached::

    DoorError                      base of everything the client raises
    ├── ConnectionFailed           the door could not be reached, or hung up
    │   └── ConnectTimeout         ... within the connect timeout (also a Timeout)
    ├── Timeout                    no answer within the timeout
    │   └── ReadTimeout
    ├── StreamBroken               a stream dropped and could not be resumed
    ├── ProtocolError              the answer is not what the door writes
    ├── HttpRefusal                an HTTP status with {"error", "message"} (401, 403, 404)
    └── RpcError                   a JSON-RPC error: code, message, reason, metadata
        ├── ParseError -32700 · InvalidRequest -32600 · MethodNotFound -32601
        ├── InvalidParams -32602 · InternalError -32603
        ├── TaskNotFound -32001 · TaskNotCancelable -32002 · PushNotSupported -32003
        ├── UnsupportedOperation -32004 · ContentTypeNotSupported -32005
        ├── InvalidAgentResponse -32006 · ExtendedCardNotConfigured -32007
        ├── ExtensionSupportRequired -32008 · VersionError -32009
        └── CompletionMisaddressed -31001 · CompletionNotAwaited -31002

Each ``RpcError`` subclass names its entry of ``murmur_wsgi/codes.py``, the
table the door's catalogue is built on too; ``RpcError.from_error`` finds the
class from the code the door answered.
"""
from __future__ import annotations

import logging

from murmur_wsgi import codes
from murmur_wsgi.codes import ERROR_INFO_TYPE

logger = logging.getLogger(__name__)


class DoorError(IOError):
    """Base of every error the client raises (like ``requests.RequestException``)."""

    def __init__(self, *args, request=None, response=None, url: str | None = None):
        super().__init__(*args)
        self.request = request
        self.response = response
        if request is None and response is not None:
            self.request = getattr(response, "request", None)
        self.url = url


class ConnectionFailed(DoorError):
    """The door could not be reached, or the connection broke before an answer."""


class Timeout(DoorError):
    """The door did not answer within the timeout."""


class ConnectTimeout(ConnectionFailed, Timeout):
    """No connection within the connect timeout."""


class ReadTimeout(Timeout):
    """Connected, but no byte arrived within the read timeout."""


class StreamBroken(ConnectionFailed):
    """A stream dropped and every attempt to resume it failed."""


class ProtocolError(DoorError):
    """The answer is not JSON-RPC, or not the shape the door writes."""


class HttpRefusal(DoorError):
    """An HTTP refusal (steps 2-5 and 11): a status and ``{"error", "message"}``."""

    def __init__(self, status: int, error: str, message: str, **kwargs):
        super().__init__(f"HTTP {status} {error}: {message}", **kwargs)
        self.status = status
        self.error = error
        self.message = message


class RpcError(DoorError):
    """A JSON-RPC error answer; A2A errors add ``reason``, ``domain`` and ``metadata``."""

    code: int | None = None
    wire: codes.ErrorCode | None = None        # the class's entry in codes.py
    _by_code: dict[int, type[RpcError]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        entry = cls.__dict__.get("wire")
        if entry is not None:
            cls.code = entry.code
            RpcError._by_code[entry.code] = cls

    def __init__(self, code: int, message: str, reason: str | None = None,
                 metadata: dict | None = None, domain: str | None = None,
                 data=None, **kwargs):
        super().__init__(f"{code} {message}", **kwargs)
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata = metadata or {}
        self.domain = domain
        self.data = data

    @classmethod
    def from_error(cls, error: dict, **kwargs) -> RpcError:
        """The error a JSON-RPC ``error`` object names, as its subclass when known."""
        code = error.get("code")
        message = error.get("message")
        data = error.get("data")
        info = {}
        if isinstance(data, list):
            info = next((d for d in data if isinstance(d, dict)
                         and d.get("@type") == ERROR_INFO_TYPE), {})
        klass = cls._by_code.get(code, RpcError) if isinstance(code, int) else RpcError
        # ErrorInfo's fields are strings (``metadata`` a map of strings to strings): a
        # server's value of another type is left out, here and in the lines that quote
        # them, as unknown (``data`` keeps what it wrote).
        metadata = info.get("metadata")
        metadata = {k: v for k, v in metadata.items() if isinstance(v, str)} \
            if isinstance(metadata, dict) else {}
        return klass(code, message if isinstance(message, str) else str(message),
                     reason=_text(info.get("reason")), metadata=metadata,
                     domain=_text(info.get("domain")), data=data, **kwargs)


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def kind_of(value) -> str:
    """What a JSON value is, in a few words, for an error's text (never the value: it may
    be megabytes)."""
    if isinstance(value, dict):
        return "an object with members"
    return {type(None): "null", bool: "a boolean", int: "a number", float: "a number",
            str: "a string", list: "a list"}.get(type(value), type(value).__name__)


class ParseError(RpcError):
    wire = codes.PARSE_ERROR


class InvalidRequest(RpcError):
    wire = codes.INVALID_REQUEST


class MethodNotFound(RpcError):
    wire = codes.METHOD_NOT_FOUND


class InvalidParams(RpcError):
    wire = codes.INVALID_PARAMS


class InternalError(RpcError):
    wire = codes.INTERNAL_ERROR


class TaskNotFound(RpcError):
    wire = codes.TASK_NOT_FOUND


class TaskNotCancelable(RpcError):
    wire = codes.TASK_NOT_CANCELABLE


class PushNotSupported(RpcError):
    wire = codes.PUSH_NOT_SUPPORTED


class UnsupportedOperation(RpcError):
    wire = codes.UNSUPPORTED_OPERATION


class ContentTypeNotSupported(RpcError):
    wire = codes.CONTENT_TYPE_NOT_SUPPORTED


class InvalidAgentResponse(RpcError):
    wire = codes.INVALID_AGENT_RESPONSE


class ExtendedCardNotConfigured(RpcError):
    wire = codes.EXTENDED_CARD_NOT_CONFIGURED


class ExtensionSupportRequired(RpcError):
    wire = codes.EXTENSION_SUPPORT_REQUIRED


class VersionError(RpcError):
    """-32009: the door does not serve the A2A-Version this request named."""

    wire = codes.VERSION_NOT_SUPPORTED

    @property
    def requested_version(self) -> str:
        return self.metadata.get("requestedVersion", "")

    @property
    def supported_versions(self) -> str:
        return self.metadata.get("supportedVersions", "")


class CompletionMisaddressed(RpcError):
    wire = codes.COMPLETION_MISADDRESSED


class CompletionNotAwaited(RpcError):
    wire = codes.COMPLETION_NOT_AWAITED
