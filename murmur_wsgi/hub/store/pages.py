"""ListTasks' page tokens, the same on every store: a task's creation number, opaque."""
from __future__ import annotations

import base64
import binascii


def encode_token(seq: int) -> str:
    return base64.urlsafe_b64encode(f"t{seq}".encode()).decode().rstrip("=")


def decode_token(token: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValueError("not a page token") from None
    if not raw.startswith("t") or not raw[1:].isdigit() or len(raw) > 20:
        raise ValueError("not a page token")
    return int(raw[1:])
