"""What both applications' property tests read of a body: its JSON, and the id to echo."""
from __future__ import annotations

import json


def refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def valid_id(value) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def sent_id(body: bytes):
    """The id an answer must echo: a valid id of a JSON object body, else None."""
    try:
        payload = json.loads(body.decode("utf-8"), parse_constant=refuse_constant)
    except (ValueError, RecursionError):
        return None
    if isinstance(payload, dict) and valid_id(payload.get("id")):
        return payload["id"]
    return None
