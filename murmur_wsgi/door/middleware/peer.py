"""Step 3: peer consent, read from x-murmur-task-origin before the path or the body."""
from __future__ import annotations

import logging

from murmur_wsgi.door.context import CallContext
from murmur_wsgi.errors import PeerNotAccepted
from murmur_wsgi.serving.ows import OWS

logger = logging.getLogger(__name__)

def _values(environ: dict, key: str) -> list[str]:
    """The comma-separated values of a header (repeated lines arrive joined)."""
    raw = environ.get(key)
    if raw is None:
        return []
    return [value.strip(OWS).lower() for value in raw.split(",")]


def check_consent(environ: dict, ctx: CallContext, accept: bool) -> None:
    """Record the task's origin and trust; refuse a peer when peers are not accepted.

    A header naming ``peer`` on any of its lines counts as a peer request, so
    a second line cannot smuggle a peer past the refusal. Trust is read only
    beside an origin the wire may carry (peer, completion): any other origin
    reads as a plain client's, untrusted. Missing or unknown trust is untrusted.
    """
    origins = set(_values(environ, "HTTP_X_MURMUR_TASK_ORIGIN"))
    if "peer" in origins:
        if not accept:
            raise PeerNotAccepted()
        ctx.origin = "peer"
    elif len(origins) == 1 and "completion" in origins:
        ctx.origin = "completion"
    if ctx.origin is not None:
        trust = _values(environ, "HTTP_X_MURMUR_TASK_TRUST")
        ctx.trust = "trusted" if trust == ["trusted"] else "untrusted"
