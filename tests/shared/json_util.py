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


def strict_json(body: bytes):
    """Parse ``body`` as RFC 8259 JSON text, or fail the test."""
    value = json.loads(body.decode("utf-8"), parse_constant=_refuse)
    _no_surrogate(value)
    return value
