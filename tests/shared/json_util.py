"""Strict JSON for tests: UTF-8 with no lone surrogate, no NaN or infinity (RFC 8259)."""
from __future__ import annotations

import json


def _refuse(literal):
    raise AssertionError(f"not JSON: {literal}")


def _no_surrogate(value):
    if isinstance(value, str):
        value.encode("utf-8")                   # raises on a lone surrogate
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_surrogate(key)
            _no_surrogate(item)
    elif isinstance(value, list):
        for item in value:
            _no_surrogate(item)


def double_int(text: str) -> int:
    """An integer as JSON text, which a double must hold (as a test's ``parse_int``)."""
    assert float(text) not in (float("inf"), float("-inf")), f"{text[:20]}… overflows a double"
    return int(text)


def strict_json(body: bytes, doubles: bool = False):
    """Parse ``body`` as RFC 8259 JSON text, or fail the test.

    With ``doubles``, every number is one a double holds, integers too (how a2a-sdk's
    protobuf reads them)."""
    value = json.loads(body.decode("utf-8"), parse_constant=_refuse,
                       parse_int=double_int if doubles else int)
    _no_surrogate(value)
    return value
