"""The hub's own errors: its HTTP refusals and SubscribeToTask's end of life.

Every other error the hub answers is the shared catalogue's (``errors.py``):
the JSON-RPC errors, and ``StoreError`` when the store cannot be reached.
A ``HubRefusal`` is a ``Refusal`` whose body is ``{"error": …}`` (the Nexus
A2A server text's), with a Bearer challenge on a 401 and, under
``/a2a/v1``, the headers every answer there carries.
"""
from __future__ import annotations

import logging

from murmur_wsgi.errors import Refusal, RpcError

logger = logging.getLogger(__name__)

CHALLENGE = 'Bearer realm="murmur-hub"'
# Every answer under /a2a/v1 depends on the credential: never cached, never shared.
A2A_HEADERS = [("Cache-Control", "private, no-store"),
               ("Vary", "Authorization, X-API-Key, X-Tenant-ID")]


class HubRefusal(Refusal):
    """An HTTP refusal of the hub: a status and a ``{"error": …}`` body (401 by default)."""

    status = 401
    error = "unauthenticated"

    def __init__(self, error: str | None = None, status: int | None = None, *,
                 a2a: bool = True):
        if error is not None:
            self.error = error
        if status is not None:
            self.status = status
        super().__init__(self.error, challenge=CHALLENGE if self.status == 401 else None,
                         headers=list(A2A_HEADERS) if a2a else None)

    def body(self) -> dict:
        return {"error": self.error}


class NoTenant(HubRefusal):
    """A JWT without ``X-Tenant-ID``."""

    error = "no tenant in context"


class NotServed(HubRefusal):
    """No route of the text at this path (or ``public_url`` is unset)."""

    status = 404
    error = "not found"


class AgentNotFound(HubRefusal):
    """Unknown, unpublished and another tenant's agents answer alike."""

    status = 404
    error = "agent not found"


class SubscriptionExpiredError(RpcError):
    """A SubscribeToTask stream reached its end of life (run timeout + 2 s)."""

    code = -32000

    def __init__(self, lifetime: float):
        super().__init__(f"this subscription has lived {lifetime:g} s, its limit; subscribe "
                         "again or poll with GetTask")
