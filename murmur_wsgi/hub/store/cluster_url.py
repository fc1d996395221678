"""The Redis Cluster form of the store's URL, ``redis-cluster://[USER:PASSWORD@]HOST:PORT[,…]``.

Read without importing redis-py's cluster client: hub.yaml is checked in gunicorn's
master, which must not import what imports ``ssl`` before gevent patches it.
"""
from __future__ import annotations

from urllib.parse import unquote, urlsplit

SCHEME = "redis-cluster"


def is_cluster(url: str) -> bool:
    return url.startswith(SCHEME + "://")


def cluster_nodes(url: str) -> tuple[list[tuple[str, int]], str | None, str | None]:
    """The ``(host, port)`` pairs, username and password of a ``redis-cluster://`` URL.

    Raises ValueError for anything else (never echoing the URL: it may carry a password)."""
    scheme, sep, rest = url.partition("://")
    if scheme != SCHEME or not sep:
        raise ValueError("not a redis-cluster:// URL")
    netloc, _, path = rest.partition("/")
    if path.strip("/") not in ("", "0"):
        raise ValueError("a Redis Cluster has only database 0")
    user = password = None
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        user, _, password = auth.partition(":")
        user, password = unquote(user) or None, unquote(password) or None
    nodes = []
    for address in netloc.split(","):
        parts = urlsplit("//" + address)
        if not parts.hostname or parts.port is None:
            raise ValueError("each node is HOST:PORT")
        nodes.append((parts.hostname, parts.port))
    return nodes, user, password
