"""Steps 6 and 7: the body is JSON, and a JSON-RPC 2.0 request."""
from __future__ import annotations

import gc
import json
import logging
import re
from itertools import accumulate

from murmur_wsgi.errors import InvalidRequestError, ParseError

logger = logging.getLogger(__name__)

_decode = json.JSONDecoder().decode


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


_strict_decode = json.JSONDecoder(parse_constant=_reject_constant).decode


# Every byte but the brackets and the quote; { and } read as [ and ].
_NOT_MARK = bytes(range(256)).translate(None, b'[]{}"')
_FOLD = bytes.maketrans(b"{}", b"[]")
_STRING = re.compile(rb'"[^"]*"')
_STEP = [0] * 256
_STEP[ord("[")], _STEP[ord("]")] = 1, -1


def too_deep(body: bytes, max_depth: int) -> bool:
    """Tell whether the JSON in ``body`` nests objects and arrays deeper than ``max_depth``.

    Reads the bytes without parsing them and without recursion, in time linear
    in the body. Exact for valid JSON; what it says of invalid JSON does not
    matter, the parser refuses that anyway.
    """
    # PERF: every step is one pass of C code over bytes; most bodies stop at the first.
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return False
    if b"\\" in body:                         # escaped backslashes, then escaped quotes
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = body.translate(_FOLD, _NOT_MARK).replace(b'""', b"")
    if b'"' in marks:
        marks = _STRING.sub(b"", marks)         # the strings that hold brackets
    # Each pass drops the innermost pairs: one level off the deepest nesting.
    for level in range(max_depth):
        if not marks:
            return False
        shorter = marks.replace(b"[]", b"")
        if len(shorter) * 4 > len(marks) * 3:   # shrinking slowly: count the rest instead
            return max(accumulate(map(_STEP.__getitem__, marks))) > max_depth - level
        marks = shorter
    return bool(marks)


def parse_json(body: bytes, max_depth: int = 64):
    """Step 6: decode the body as UTF-8 JSON (NaN and Infinity refused), or -32700.

    JSON nested deeper than ``max_depth`` (``limits.max_json_depth``) is
    refused the same way, before it is parsed.
    """
    if too_deep(body, max_depth):
        logger.info("refused a body nested deeper than limits.max_json_depth (%d)", max_depth)
        raise ParseError()
    # PERF: the cyclic GC runs every 700 containers the parser makes, over all that
    # survive: on a body of many small arrays it took 6 times the parse itself. Nothing
    # the parser makes is a cycle; the next collection still sees it all.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _strict_decode(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ParseError() from None
    finally:
        if enabled:
            gc.enable()


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
