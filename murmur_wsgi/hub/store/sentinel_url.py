"""The Sentinel form of the store's URL, ``redis-sentinel://HOSTS/SERVICE/DB[?QUERY]``, and
over TLS ``rediss-sentinel://…``.

``HOSTS`` is ``[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]``: the sentinels;
``SERVICE`` the name they watch the primary under (``sentinel monitor SERVICE …``);
``DB`` the primary's database number (0 when left out). A user and password are
the primary's (and its replicas'). The sentinels' own (their ``requirepass``, or an
ACL user of theirs) are the query's ``sentinel_password`` and ``sentinel_username``;
without them the sentinels are asked without one.

``rediss-sentinel://`` speaks TLS to the sentinels and to the primary (and its replicas)
alike, each verified against the system's CAs or the query's ``ssl_ca_certs`` (its
certificate for the host the sentinels name it by); ``ssl_certfile`` and ``ssl_keyfile``
are the hub's certificate for mutual TLS, presented to each. ``parse`` raises
``ValueError`` with a message that never echoes the URL (it may carry a password).

Read without importing redis-py: hub.yaml is checked in gunicorn's master, which must not
import what imports ``ssl`` before gevent patches it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote

from murmur_wsgi.hub.store.cluster_url import TLS_QUERY, host_port

SCHEME = "redis-sentinel"
TLS_SCHEME = "rediss-sentinel"
AUTH_QUERY = ("sentinel_username", "sentinel_password")


@dataclass(frozen=True)
class SentinelUrl:
    sentinels: tuple          # ((host, port), …)
    service: str
    db: int
    username: str | None
    password: str | None
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    tls: dict = field(default_factory=dict)     # redis-py's ssl settings (rediss-sentinel)


def is_sentinel(url: str) -> bool:
    return url.startswith((SCHEME + "://", TLS_SCHEME + "://"))


def parse(url: str) -> SentinelUrl:
    scheme, _, rest = url.partition("://")
    if not is_sentinel(url) or not rest:
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
    asked = _query(scheme, query)
    tls = {"ssl": True, **{name: asked[name] for name in TLS_QUERY if name in asked}} \
        if scheme == TLS_SCHEME else {}
    return SentinelUrl(sentinels, unquote(service), int(db or 0), username, password,
                       asked.get("sentinel_username"), asked.get("sentinel_password"), tls)


def _query(scheme: str, query: str) -> dict:
    """The query's ``sentinel_username`` and ``sentinel_password``, and over TLS its
    ``TLS_QUERY`` files (each once, none empty)."""
    fields = parse_qs(query, keep_blank_values=True) if query else {}
    allowed = AUTH_QUERY + (TLS_QUERY if scheme == TLS_SCHEME else ())
    if set(fields) - set(allowed) or "#" in query or \
            any(len(values) > 1 or not values[0] for values in fields.values()):
        tls = "" if scheme == TLS_SCHEME else " (rediss-sentinel:// for TLS and its ssl_… files)"
        raise ValueError(f"a {scheme} URL's query takes {', '.join(allowed)} only, each once "
                         f"and none empty{tls}")
    return {name: values[0] for name, values in fields.items()}


def _address(part: str) -> tuple:
    try:
        return host_port(part)
    except ValueError:
        raise ValueError("a redis-sentinel URL's hosts are HOST:PORT, separated by commas "
                         "(an IPv6 address in brackets: [::1]:26379)") from None
