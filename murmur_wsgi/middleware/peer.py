"""Step 3: peer consent, read from x-murmur-task-origin before anything else."""
from __future__ import annotations

import logging

from murmur_wsgi.context import CallContext
from murmur_wsgi.errors import PeerNotAccepted

logger = logging.getLogger(__name__)

ORIGINS = ("peer", "completion")


def check_consent(environ: dict, ctx: CallContext, accept: bool) -> None:
    """Record the task's origin and trust; refuse a peer when peers are not accepted."""
    origin = environ.get("HTTP_X_MURMUR_TASK_ORIGIN", "").strip().lower()
    if origin in ORIGINS:
        ctx.origin = origin
        trust = environ.get("HTTP_X_MURMUR_TASK_TRUST", "").strip().lower()
        ctx.trust = "trusted" if trust == "trusted" else "untrusted"
    if origin == "peer" and not accept:
        raise PeerNotAccepted()
