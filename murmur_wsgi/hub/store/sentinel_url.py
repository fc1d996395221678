"""The Sentinel form of the store's URL, ``redis-sentinel://HOSTS/SERVICE/DB[?QUERY]``.

``HOSTS`` is ``[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]``: the sentinels;
``SERVICE`` the name they watch the primary under (``sentinel monitor SERVICE …``);
``DB`` the primary's database number (0 when left out). A user and password are
the primary's (and its replicas'). The sentinels' own (their ``requirepass``, or an
ACL user of theirs) are the query's ``sentinel_password`` and ``sentinel_username``;
without them the sentinels are asked without one. ``parse`` raises ``ValueError``
with a message that never echoes the URL (it may carry a password).
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote

SCHEME = "redis-sentinel"


@dataclass(frozen=True)
class SentinelUrl:
    sentinels: tuple          # ((host, port), …)
    service: str
    db: int
    username: str | None
    password: str | None
    sentinel_username: str | None = None
    sentinel_password: str | None = None


def is_sentinel(url: str) -> bool:
    return url.startswith(SCHEME + "://")


def parse(url: str) -> SentinelUrl:
    rest = url[len(SCHEME) + 3:] if is_sentinel(url) else ""
    if not rest:
        raise ValueError("is not a redis-sentinel:// URL")
    rest, _, query = rest.partition("?")
    auth, _, rest = rest.rpartition("@")
    hosts, _, path = rest.partition("/")
    service, _, db = path.partition("/")
    if not service or "/" in db:
        raise ValueError("a redis-sentinel URL names its service: "
                         "redis-sentinel://HOST:PORT[,HOST:PORT…]/SERVICE/DB")
    # NOTE: ASCII digits, a few (str.isdigit takes '²' and '٠', int() refuses 4,300).
    if db and not (db.isascii() and db.isdigit() and len(db) <= 10):
        raise ValueError("a redis-sentinel URL's last part is the database number "
                         "(redis-sentinel://HOST:PORT/SERVICE/0)")
    sentinels = tuple(_address(part) for part in hosts.split(","))
    username = password = None
    if auth:
        user, colon, secret = auth.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    asked = _sentinels_auth(query)
    return SentinelUrl(sentinels, unquote(service), int(db or 0), username, password,
                       asked.get("sentinel_username"), asked.get("sentinel_password"))


def _sentinels_auth(query: str) -> dict:
    """The query's ``sentinel_username`` and ``sentinel_password`` (each once)."""
    fields = parse_qs(query, keep_blank_values=True) if query else {}
    if set(fields) - {"sentinel_username", "sentinel_password"} or \
            any(len(values) > 1 for values in fields.values()) or "#" in query:
        raise ValueError("a redis-sentinel URL's query takes sentinel_username and "
                         "sentinel_password only, each once")
    return {name: values[0] or None for name, values in fields.items()}


def _address(part: str) -> tuple:
    host, colon, port = part.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not (port.isascii() and port.isdigit()) \
            or len(port) > 5 or not 0 < int(port) < 65536:
        raise ValueError("a redis-sentinel URL's hosts are HOST:PORT, separated by commas")
    return host, int(port)
