"""The answers both applications write outside a result: HTTP refusals and JSON-RPC errors.

A ``Refusal`` (``errors.py``) carries its status, challenge, extra headers and
body; an ``RpcError`` its error object and HTTP status. Each application
passes its encoder (``dumps``: the door's ``compact_ascii``, the hub's
``compact_utf8``), so its bytes stay its own.
"""
from __future__ import annotations

import logging

from murmur_wsgi.errors import Refusal, RpcError
from murmur_wsgi.wire import rpc as wire_rpc
from murmur_wsgi.wire.encode import compact_ascii

logger = logging.getLogger(__name__)

JSON_HEADERS = ("Content-Type", "application/json")
REASONS = {200: "OK", 304: "Not Modified", 400: "Bad Request", 401: "Unauthorized",
           403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 410: "Gone",
           413: "Content Too Large", 500: "Internal Server Error"}


_LINES = {status: f"{status} {reason}" for status, reason in REASONS.items()}


def status_line(status: int) -> str:
    """``"404 Not Found"``: the WSGI status of ``status``."""
    return _LINES.get(status) or f"{status} Error"


def refusal_response(ex: Refusal, dumps=compact_ascii) -> tuple[str, list, bytes]:
    """An HTTP refusal: status, headers and the plain JSON body (no envelope)."""
    data = dumps(ex.body()).encode()
    headers = [JSON_HEADERS, ("Content-Length", str(len(data)))]
    if ex.challenge:
        headers.append(("WWW-Authenticate", ex.challenge))
    headers.extend(ex.headers)
    return status_line(ex.status), headers, data


def rpc_error(request_id, error: RpcError, dumps=compact_ascii) -> bytes:
    """Serialize a JSON-RPC error response."""
    return wire_rpc.error(request_id, error.error_object(), dumps).encode()
