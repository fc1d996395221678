"""Step 9: a completion (x-murmur-task-origin: completion) is routed on its own path."""
from __future__ import annotations

import logging

from murmur_wsgi.door.context import RpcCall
from murmur_wsgi.errors import (CompletionMisaddressedError, CompletionNotAwaitedError,
                                MethodNotFoundError)
from murmur_wsgi.serving.ows import OWS

logger = logging.getLogger(__name__)


def check(call: RpcCall, session) -> bool:
    """Return True when the call is a completion the session awaits; raise its refusal."""
    if call.ctx.origin != "completion":
        return False
    addressed = call.environ.get("HTTP_X_MURMUR_COMPLETION_SESSION", "").strip(OWS)
    if addressed != session.id:
        raise CompletionMisaddressedError(addressed)
    if call.method != "SendMessage":
        raise MethodNotFoundError()
    delegation = call.environ.get("HTTP_X_MURMUR_DELEGATION_ID", "").strip(OWS)
    if not delegation or not session.delegations.awaits(delegation):
        raise CompletionNotAwaitedError(delegation or None)
    call.ctx.delegation_id = delegation
    return True
