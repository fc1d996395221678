"""Each config's signing key, and the JWT that signs one notification.

key = HMAC-SHA256(master secret, message), where the message is the label
``murmur-hub push key v1`` followed by tenant, agent, task id and config id,
each as its UTF-8 length (4 bytes, big-endian) then its UTF-8 bytes: no two
different tuples give one message. The key travels as base64url without
padding (43 characters); a receiver decodes it and uses the 32 raw bytes.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time

import jwt

logger = logging.getLogger(__name__)

LABEL = b"murmur-hub push key v1"
LIFETIME_SECS = 300            # exp = iat + 5 min


def _field(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    return len(raw).to_bytes(4, "big") + raw


def derive_key(master: bytes, tenant: str, agent: str, task_id: str, config_id: str) -> bytes:
    message = LABEL + b"".join(_field(v) for v in (tenant, agent, task_id, config_id))
    return hmac.new(master, message, hashlib.sha256).digest()


def encode_key(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode("ascii").rstrip("=")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def jti(task_id: str, config_id: str, seq: int) -> str:
    """One event's id, the same on every retry: ``<taskId>/<configId>/<seq>``."""
    return f"{task_id}/{config_id}/{seq}"


def sign(key: bytes, *, issuer: str, audience: str, task_id: str, config_id: str, seq: int,
         body: bytes, token: str | None, now: float | None = None) -> str:
    """The notification's JWT (HS256), with exactly the claims the text lists."""
    iat = int(time.time() if now is None else now)
    claims = {"iss": issuer, "aud": audience, "iat": iat, "exp": iat + LIFETIME_SECS,
              "jti": jti(task_id, config_id, seq), "taskId": task_id, "configId": config_id,
              "bodySha256": sha256_hex(body)}
    if token is not None:
        claims["tokenSha256"] = sha256_hex(token.encode("utf-8", "surrogatepass"))
    return jwt.encode(claims, key, algorithm="HS256")
