"""The error catalogue: every refusal the door and the hub can answer, in one place.

Handlers and layers raise these; each application's request path alone
(``door/dispatch.py``, ``hub/routes.py``) turns them into the wire: a
``Refusal`` carries its HTTP status, challenge and body, an ``RpcError`` its
JSON-RPC error object (``serving/answers.py`` writes both). The hub's own
refusals (``hub/errors.py``) are ``Refusal``s too; the hub's store failing is
``StoreError``, an internal error with a public message.
"""
from __future__ import annotations

import logging

from murmur_wsgi import codes
from murmur_wsgi.codes import A2A_DOMAIN, ERROR_INFO_TYPE, MURMUR_DOMAIN  # noqa: F401

logger = logging.getLogger(__name__)


class DoorError(Exception):
    """Root of every error an application answers (the door's and the hub's alike);
    caught only in each one's request path."""

    message = "door error"

    def __init__(self, message: str | None = None):
        if message is not None:
            self.message = message
        super().__init__(self.message)


# --- HTTP-level refusals (steps 2-5, 11 and the planes) --------------------


class Refusal(DoorError):
    """An HTTP status with a plain JSON body (the door's: ``{"error", "message"}``)."""

    status = 404
    error = "not_found"
    message = "nothing is served at this path"

    def __init__(self, message: str | None = None, *, challenge: str | None = None,
                 headers: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.challenge = challenge
        self.headers = headers or []

    def body(self) -> dict:
        return {"error": self.error, "message": self.message}


class NotFound(Refusal):
    status = 404
    error = "not_found"
    message = "the door answers JSON-RPC as POST / with content-type: application/json and a body"


class Unauthenticated(Refusal):
    status = 401
    error = "unauthenticated"
    message = ("this door takes a token this capsule's runtime minted, "
               "as Authorization: Bearer <token>")


class InvalidToken(Refusal):
    status = 401
    error = "invalid_token"
    message = "the Authorization header does not present a token this session minted"


class PeerNotAccepted(Refusal):
    status = 403
    error = "peer_not_accepted"
    message = "this capsule does not accept tasks from peers"


class InsufficientScope(Refusal):
    status = 403
    error = "insufficient_scope"

    def __init__(self, credential: str, scope: str, realm_challenge: str):
        super().__init__(f"credential '{credential}' does not reach {scope}",
                         challenge=f'{realm_challenge}, error="insufficient_scope", scope="{scope}"')
        self.scope = scope


class PlaneRefusal(Refusal):
    """A refusal of the operator or peer plane; status and code vary."""

    def __init__(self, status: int, error: str, message: str,
                 headers: list[tuple[str, str]] | None = None):
        super().__init__(message, headers=headers)
        self.status = status
        self.error = error


# --- JSON-RPC errors (steps 6-14) ------------------------------------------


class RpcError(DoorError):
    """A standard JSON-RPC error: HTTP 200, ``error`` without ``data``.

    A subclass names its entry of ``codes.py`` as ``wire``; its ``code``
    (and an A2A error's ``reason`` and ``domain``) are read from there.
    """

    wire = codes.INTERNAL_ERROR
    code = wire.code
    message = "Internal error"
    http_status = 200

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        entry = cls.__dict__.get("wire")
        if entry is not None:
            cls.code = entry.code
            if entry.reason is not None:
                cls.reason = entry.reason
                cls.domain = entry.domain

    def error_object(self) -> dict:
        return {"code": self.code, "message": self.message}


class ParseError(RpcError):
    wire = codes.PARSE_ERROR
    message = "Invalid JSON payload"


class InvalidRequestError(RpcError):
    wire = codes.INVALID_REQUEST
    message = "Request payload validation error"


class BodyTooLargeError(InvalidRequestError):
    """A body over ``limits.max_body_bytes``: -32600 with id null, answered with HTTP 413."""

    http_status = 413


class BodyUnreadableError(InvalidRequestError):
    """A chunked body whose framing is broken, or that ended early: -32600 with id null,
    answered with HTTP 400 (the connection closes: the rest of the body is unread)."""

    http_status = 400


class MethodNotFoundError(RpcError):
    wire = codes.METHOD_NOT_FOUND
    message = "Method not found"


class InvalidParamsError(RpcError):
    wire = codes.INVALID_PARAMS
    message = "Invalid params"


class InternalError(RpcError):
    wire = codes.INTERNAL_ERROR
    message = "Internal error: the door could not hand the request to the session"


class StoreError(InternalError):
    """The hub's task store cannot be reached in time (Redis down or slow): -32603 with a
    public message, logged where it failed."""

    message = "Internal error: the hub's task store is unavailable; try again shortly"


class A2AError(RpcError):
    """An A2A error: ``data`` holds one google.rpc.ErrorInfo."""

    domain = A2A_DOMAIN
    reason = "UNKNOWN"

    def __init__(self, message: str | None = None, **metadata: str):
        super().__init__(message)
        self.metadata = {k: str(v) for k, v in metadata.items()}

    def error_object(self) -> dict:
        return {"code": self.code, "message": self.message,
                "data": [{"@type": ERROR_INFO_TYPE, "reason": self.reason,
                          "domain": self.domain, "metadata": self.metadata}]}


class TaskNotFoundError(A2AError):
    wire = codes.TASK_NOT_FOUND
    message = "Task not found"

    def __init__(self, task_id: str):
        super().__init__(None, taskId=task_id)


class TaskNotCancelableError(A2AError):
    """-32002: the task has ended (``state``, the state it ended in), or, given ``why``, a
    run that cannot be cut for that reason (``state``, the task's state now)."""

    wire = codes.TASK_NOT_CANCELABLE

    def __init__(self, task_id: str, state: str, why: str | None = None):
        super().__init__(f"Task cannot be canceled: {why or f'it is already {state}'}",
                         taskId=task_id, state=state)


class PushNotificationNotSupportedError(A2AError):
    wire = codes.PUSH_NOT_SUPPORTED
    message = "push notifications are not supported by this agent"


class UnsupportedOperationError(A2AError):
    wire = codes.UNSUPPORTED_OPERATION
    message = "This operation is not supported by this agent"


class ContentTypeNotSupportedError(A2AError):
    wire = codes.CONTENT_TYPE_NOT_SUPPORTED


class InvalidAgentResponseError(A2AError):
    wire = codes.INVALID_AGENT_RESPONSE
    message = "Invalid agent response"


class ExtendedAgentCardNotConfiguredError(A2AError):
    wire = codes.EXTENDED_CARD_NOT_CONFIGURED
    message = "Extended agent card not configured"


class ExtensionSupportRequiredError(A2AError):
    wire = codes.EXTENSION_SUPPORT_REQUIRED
    message = "Extension support required"


class VersionNotSupportedError(A2AError):
    wire = codes.VERSION_NOT_SUPPORTED

    def __init__(self, requested: str):
        super().__init__(f"A2A version '{requested}' is not supported; this agent speaks 1.0",
                         requestedVersion=requested, supportedVersions="1.0")


class MurmurError(A2AError):
    """murmur's own errors, outside JSON-RPC's reserved range."""

    domain = MURMUR_DOMAIN


class CompletionMisaddressedError(MurmurError):
    wire = codes.COMPLETION_MISADDRESSED

    def __init__(self, addressed: str):
        shown = addressed or "no session"
        super().__init__(f"this completion is addressed to {shown}, not to the session running here",
                         addressedSession=addressed)


class CompletionNotAwaitedError(MurmurError):
    wire = codes.COMPLETION_NOT_AWAITED

    def __init__(self, delegation_id: str | None):
        if delegation_id:
            super().__init__(f"no task in this session is waiting for delegation {delegation_id}",
                             delegationId=delegation_id)
        else:
            super().__init__("this completion names no delegation in x-murmur-delegation-id")


# The catalogue the spec's tables list, by code (each class's, read from codes.py), checked by
# tests/shared/test_errors.py and tests/shared/test_codes.py.
CATALOGUE = {cls.code: cls for cls in (
    ParseError, InvalidRequestError, MethodNotFoundError, InvalidParamsError, InternalError,
    TaskNotFoundError, TaskNotCancelableError, PushNotificationNotSupportedError,
    UnsupportedOperationError, ContentTypeNotSupportedError, InvalidAgentResponseError,
    ExtendedAgentCardNotConfiguredError, ExtensionSupportRequiredError, VersionNotSupportedError,
    CompletionMisaddressedError, CompletionNotAwaitedError)}
