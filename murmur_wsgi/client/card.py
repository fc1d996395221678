"""What the client reads of an agent's address and card: its URLs, its JSON-RPC endpoint,
whether it is a Murmur door, and which URLs share the agent's origin (where its
credential may go)."""
from __future__ import annotations

import ipaddress
import logging
from urllib.parse import urlsplit

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


def origin(url: str) -> tuple[str, str, int | None] | None:
    """``(scheme, host, port)`` of ``url``; every loopback name is one host; None if unreadable.

    ``localhost``, ``127.x.x.x`` and ``::1`` count as one host, since a door's card
    names ``localhost`` while it listens on ``127.0.0.1``.

    NOTE: ``requests`` connects where urllib3 reads the URL it prepared, which is not
    always where ``urlsplit`` reads it: a backslash ends urllib3's authority and not
    urlsplit's, so ``http://other:1\\@127.0.0.1:2/`` is 127.0.0.1:2 to one and other:1 to
    the other. A URL has an origin only when both read the same one (None otherwise),
    its host as requests connects to it: a Unicode host by its IDNA form.
    """
    here = _split(url)
    if here is None:
        return None
    # PERF: requests, once a command runs (``murmur-wsgi serve`` lists this module's
    # commands without loading it).
    import idna
    from requests.exceptions import RequestException
    from requests.models import PreparedRequest

    scheme, host, port = here
    if not host.isascii():
        try:                                      # as requests encodes it (its own idna)
            here = scheme, idna.encode(host, uts46=True).decode("ascii"), port
        except UnicodeError:                      # idna.IDNAError: no IDNA form
            return None
    prepared = PreparedRequest()
    try:
        prepared.prepare_url(url, None)
    except (RequestException, ValueError):        # InvalidURL, MissingSchema, bad IDNA
        return None
    return here if _split(prepared.url) == here else None


def _split(url: str) -> tuple[str, str, int | None] | None:
    """``origin`` as ``urlsplit`` reads it."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host:
        return None
    if _loopback(host):
        host = "loopback"
    return scheme, host, port or (443 if scheme == "https" else 80)


def _loopback(host: str) -> bool:
    """``localhost``, or a loopback address (127.0.0.0/8, ::1) written as one.

    NOTE: an address, not a name that begins like one: ``127.0.0.1.attacker.example`` is
    another host, to which a prefix check handed the credential (a redirect, a card's
    endpoint)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def same_origin(url: str, other: str) -> bool:
    """Both URLs name the same scheme, host and port (the origin a credential is for)."""
    here = origin(url)
    return here is not None and here == origin(other)


def is_door(card) -> bool:
    """The card declares the Murmur door extension (its own methods: watch, stop)."""
    capabilities = card.get("capabilities") if isinstance(card, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, list) and any(
        isinstance(e, dict) and e.get("uri") == DOOR_URI for e in extensions)
