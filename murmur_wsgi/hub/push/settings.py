"""The ``push`` block's rules: enabled needs a master secret of 32 bytes or more.

``allow_networks`` and ``ca_file`` exist for the project's own tests (a local
HTTPS receiver on loopback with a certificate the test made): a production
hub never sets them, and the hub logs a warning at boot whenever
``allow_networks`` is set. ``retry_scale`` (0 < x <= 1, default 1) multiplies
the retry waits (1 s, 2 s, 4 s) so the e2e tests can prove the retry path
with real 5xx answers in milliseconds; it is test-only too, warned at boot
whenever it is not 1.
"""
from __future__ import annotations

import ipaddress
import logging
import os

from marshmallow import ValidationError

logger = logging.getLogger(__name__)

MIN_SECRET_BYTES = 32


def secret_bytes(secret: str) -> bytes:
    return secret.encode("utf-8", "surrogatepass")


def networks(values: list) -> list:
    """``allow_networks`` as ip_network objects (already validated)."""
    return [ipaddress.ip_network(v, strict=False) for v in values]


def check_push(data: dict) -> None:
    """Raise ValidationError naming the key of the first rule ``data`` breaks."""
    for i, value in enumerate(data.get("allow_networks") or []):
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValidationError({i: [f"'{value}' is not a network (e.g. 127.0.0.0/8)"]},
                                  "allow_networks") from None
    ca_file = data.get("ca_file")
    if ca_file is not None and not os.path.isfile(ca_file):
        raise ValidationError(f"'{ca_file}' is not a readable file", "ca_file")
    if not data.get("enabled"):
        return
    secret = data.get("secret")
    if not secret:
        raise ValidationError("is required when push.enabled is true (a master secret of at "
                              f"least {MIN_SECRET_BYTES} bytes, e.g. from "
                              "MURMUR_HUB_PUSH_SECRET)", "secret")
    if len(secret_bytes(secret)) < MIN_SECRET_BYTES:
        raise ValidationError(f"must be at least {MIN_SECRET_BYTES} bytes", "secret")
