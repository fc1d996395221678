"""Copies of what an agent hands the door, which nothing the agent holds can change.

An event is immutable once published, and a value that is not JSON must fail
the agent's own call rather than every stream that meets it: frame fields and
artifacts are copied, and checked, when the agent gives them.
"""
from __future__ import annotations

import json
import logging

from murmur_wsgi.agents.endings import AgentValueError, check_text, json_text

logger = logging.getLogger(__name__)

_SCALARS = (int, bool, type(None))


def json_copy(value, what: str):
    """A copy of an agent's ``value`` through JSON, which nothing the agent holds can change.

    Raises:
        AgentValueError (a TypeError and a ValueError): ``value`` is not JSON (a
            set, bytes, an object, NaN or infinity, a key that is not a string, a
            lone surrogate): ``<what>: not a JSON value: …``.
    """
    return json.loads(json_text(value, what))


def own_fields(name: str, fields: dict) -> dict:
    """A copy of an agent's frame fields that nothing the agent holds can change.

    Each value must be JSON (no NaN or infinity, string keys, no lone surrogate): a
    value that is not raises ``AgentValueError`` naming the frame and its key, in the
    agent's own call, so no stream ever meets it. Strings, integers, booleans and None
    are kept as they are (immutable); any other value is copied through a JSON round trip.
    """
    if not isinstance(fields, dict):
        raise AgentValueError(
            f"frame '{name}': fields must be a dict, not {type(fields).__name__}")
    owned = {}
    for key, value in fields.items():
        if not isinstance(key, str):
            raise AgentValueError(f"frame '{name}': key {key!r} is not a string")
        if type(value) is str:
            check_text(value, f"frame '{name}', key '{key}'")
        elif type(value) not in _SCALARS:
            value = json_copy(value, f"frame '{name}', key '{key}'")
        owned[key] = value
    return owned
