"""The hub's own JSON-RPC errors (the door's catalogue, errors.py, has every other)."""
from __future__ import annotations

import logging

from murmur_wsgi.errors import RpcError

logger = logging.getLogger(__name__)


class SubscriptionExpiredError(RpcError):
    """A SubscribeToTask stream reached its end of life (run timeout + 2 s)."""

    code = -32000

    def __init__(self, lifetime: float):
        super().__init__(f"this subscription has lived {lifetime:g} s, its limit; subscribe "
                         "again or poll with GetTask")
