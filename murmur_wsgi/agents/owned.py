"""Copies of what an agent hands the door, which nothing the agent holds can change.

An event is immutable once published, and a value that is not JSON must fail
the agent's own call rather than every stream that meets it: frame fields and
artifacts are copied, and checked, when the agent gives them.
"""
from __future__ import annotations

import json
import logging

logger = logging.getLogger(__name__)

_SCALARS = (str, int, bool, type(None))
_strict_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def json_copy(value, what: str):
    """A copy of an agent's ``value`` through JSON, which nothing the agent holds can change.

    Raises:
        TypeError, ValueError: ``value`` is not JSON (a set, an object, NaN or
            infinity, a key that is not a string): ``<what>: not a JSON value: …``.
    """
    try:
        return json.loads(_strict_dumps(value))
    except (TypeError, ValueError, RecursionError) as ex:
        kind = TypeError if isinstance(ex, TypeError) else ValueError
        raise kind(f"{what}: not a JSON value: {ex}") from None


def own_fields(name: str, fields: dict) -> dict:
    """A copy of an agent's frame fields that nothing the agent holds can change.

    Each value must be JSON (no NaN or infinity, string keys): a value that is not
    raises TypeError or ValueError naming the frame and its key, in the agent's own
    call, so no stream ever meets it. Strings, integers, booleans and None are kept
    as they are (immutable); any other value is copied through a JSON round trip.
    """
    if not isinstance(fields, dict):
        raise TypeError(f"frame '{name}': fields must be a dict, not {type(fields).__name__}")
    owned = {}
    for key, value in fields.items():
        if not isinstance(key, str):
            raise TypeError(f"frame '{name}': key {key!r} is not a string")
        if type(value) not in _SCALARS:
            value = json_copy(value, f"frame '{name}', key '{key}'")
        owned[key] = value
    return owned
