"""The error codes both sides speak: each JSON-RPC and A2A code, its reason and domain.

The door's catalogue (``errors.py``) and the client's typed errors
(``client/errors.py``) both name their codes from this one table, so a code or
a reason is written once. Messages stay with the door's classes: they are what
the door says, not what a code is.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

logger = logging.getLogger(__name__)

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
A2A_DOMAIN = "a2a-protocol.org"
MURMUR_DOMAIN = "murmur.nexus"


@dataclass(frozen=True)
class ErrorCode:
    """One code: standard JSON-RPC (no reason, no data) or A2A/murmur (an ErrorInfo)."""

    code: int
    reason: str | None = None      # google.rpc.ErrorInfo.reason; None: a standard error
    domain: str | None = None      # google.rpc.ErrorInfo.domain


PARSE_ERROR = ErrorCode(-32700)
INVALID_REQUEST = ErrorCode(-32600)
METHOD_NOT_FOUND = ErrorCode(-32601)
INVALID_PARAMS = ErrorCode(-32602)
INTERNAL_ERROR = ErrorCode(-32603)
TASK_NOT_FOUND = ErrorCode(-32001, "TASK_NOT_FOUND", A2A_DOMAIN)
TASK_NOT_CANCELABLE = ErrorCode(-32002, "TASK_NOT_CANCELABLE", A2A_DOMAIN)
PUSH_NOT_SUPPORTED = ErrorCode(-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", A2A_DOMAIN)
UNSUPPORTED_OPERATION = ErrorCode(-32004, "UNSUPPORTED_OPERATION", A2A_DOMAIN)
CONTENT_TYPE_NOT_SUPPORTED = ErrorCode(-32005, "CONTENT_TYPE_NOT_SUPPORTED", A2A_DOMAIN)
INVALID_AGENT_RESPONSE = ErrorCode(-32006, "INVALID_AGENT_RESPONSE", A2A_DOMAIN)
EXTENDED_CARD_NOT_CONFIGURED = ErrorCode(-32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
                                         A2A_DOMAIN)
EXTENSION_SUPPORT_REQUIRED = ErrorCode(-32008, "EXTENSION_SUPPORT_REQUIRED", A2A_DOMAIN)
VERSION_NOT_SUPPORTED = ErrorCode(-32009, "VERSION_NOT_SUPPORTED", A2A_DOMAIN)
COMPLETION_MISADDRESSED = ErrorCode(-31001, "COMPLETION_MISADDRESSED", MURMUR_DOMAIN)
COMPLETION_NOT_AWAITED = ErrorCode(-31002, "COMPLETION_NOT_AWAITED", MURMUR_DOMAIN)

# Every code, once: the spec's tables "Errors" and "Completion errors".
CODES = {entry.code: entry for entry in (
    PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR,
    TASK_NOT_FOUND, TASK_NOT_CANCELABLE, PUSH_NOT_SUPPORTED, UNSUPPORTED_OPERATION,
    CONTENT_TYPE_NOT_SUPPORTED, INVALID_AGENT_RESPONSE, EXTENDED_CARD_NOT_CONFIGURED,
    EXTENSION_SUPPORT_REQUIRED, VERSION_NOT_SUPPORTED, COMPLETION_MISADDRESSED,
    COMPLETION_NOT_AWAITED)}
