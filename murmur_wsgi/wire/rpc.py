"""The JSON-RPC 2.0 response around a result or an error, as compact JSON text.

Both applications write it, each with its encoder (``dumps``: the door's
``compact_ascii``, the hub's ``compact_utf8``); a result already serialized (a
task's cached wire form, a stream's event) is quoted as it is, never re-encoded.
"""
from __future__ import annotations

from murmur_wsgi.wire.encode import compact_ascii


def _id(request_id, dumps) -> str:
    """The id as JSON. PERF: an integer (most clients number their requests) is its
    digits, as every encoder writes it, without the encoder's call (about 1 µs)."""
    return str(request_id) if type(request_id) is int else dumps(request_id)


def head(request_id, dumps=compact_ascii) -> str:
    """``{"jsonrpc":"2.0","id":<id>``: what a response's ``result`` or ``error`` follows."""
    return f'{{"jsonrpc":"2.0","id":{_id(request_id, dumps)}'


def result(request_id, result_json: str, dumps=compact_ascii) -> str:
    """A success response around ``result_json``, a result already serialized."""
    return f'{{"jsonrpc":"2.0","id":{_id(request_id, dumps)},"result":{result_json}}}'


def error(request_id, error_object: dict, dumps=compact_ascii) -> str:
    """An error response carrying ``error_object`` (``RpcError.error_object()``)."""
    return f'{{"jsonrpc":"2.0","id":{_id(request_id, dumps)},"error":{dumps(error_object)}}}'
