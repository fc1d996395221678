"""GetExtendedAgentCard: the extended card of an authenticated door."""
from __future__ import annotations

import logging

from murmur_wsgi.wire.raw import RawJSON

logger = logging.getLogger(__name__)


def get_extended_agent_card(door, call, params: None):
    """Return the extended card (params are not read)."""
    body, _, _ = door.cards.get(door.base_url(call.environ), extended=True)
    return RawJSON(body.decode())
