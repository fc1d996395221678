"""What the client reads of an agent's address and card: its URLs, its JSON-RPC endpoint,
whether it is a Murmur door."""
from __future__ import annotations

import logging

from murmur_wsgi.uris import CARD_PATH, DOOR_URI

logger = logging.getLogger(__name__)


def door_url(address: str) -> str:
    """``host:port`` (a running record's form) or a URL, as ``http://host:port``."""
    address = address.strip().rstrip("/")
    if "://" not in address:
        address = "http://" + address
    return address


def agent_urls(address: str) -> tuple[str, str]:
    """An agent's base URL or card URL, as ``(base URL, card URL)``."""
    url = door_url(address)
    if url.endswith(CARD_PATH):
        url = url[:-len(CARD_PATH)].rstrip("/")
    return url, url + CARD_PATH


def card_endpoint(card) -> str | None:
    """The card's ``supportedInterfaces[0].url``, the JSON-RPC endpoint, or None."""
    interfaces = card.get("supportedInterfaces") if isinstance(card, dict) else None
    if isinstance(interfaces, list) and interfaces and isinstance(interfaces[0], dict):
        url = interfaces[0].get("url")
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            return url
    return None


def is_door(card) -> bool:
    """The card declares the Murmur door extension (its own methods: watch, stop)."""
    extensions = ((card or {}).get("capabilities") or {}).get("extensions") or []
    return any(isinstance(e, dict) and e.get("uri") == DOOR_URI for e in extensions)
