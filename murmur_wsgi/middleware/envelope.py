"""Steps 6 and 7: the body is JSON, and a JSON-RPC 2.0 request."""
from __future__ import annotations

import json
import logging

from murmur_wsgi.errors import InvalidRequestError, ParseError

logger = logging.getLogger(__name__)

_decode = json.JSONDecoder().decode


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


_strict_decode = json.JSONDecoder(parse_constant=_reject_constant).decode


def parse_json(body: bytes):
    """Step 6: decode the body as UTF-8 JSON (NaN and Infinity refused), or -32700."""
    try:
        return _strict_decode(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ParseError() from None


def valid_id(value) -> bool:
    """A JSON-RPC id the door echoes: a string or an integer (not a boolean)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class EnvelopeError(InvalidRequestError):
    """-32600 carrying the id to echo (None when the id itself is not valid)."""

    def __init__(self, request_id):
        super().__init__()
        self.request_id = request_id


def check_envelope(payload) -> tuple:
    """Step 7: return (id, method, params) of a JSON-RPC 2.0 request, or -32600."""
    if not isinstance(payload, dict):
        raise EnvelopeError(None)                   # a batch array, or a bare value
    request_id = payload.get("id")
    echo = request_id if valid_id(request_id) else None
    if payload.get("jsonrpc") != "2.0" or "id" not in payload or echo is None:
        raise EnvelopeError(echo)
    method = payload.get("method")
    if not isinstance(method, str):
        raise EnvelopeError(echo)
    return request_id, method, payload.get("params", _ABSENT)


class _Absent:
    """params omitted: reads as {}."""

    def __repr__(self):
        return "<absent>"


_ABSENT = _Absent()
ABSENT = _ABSENT
