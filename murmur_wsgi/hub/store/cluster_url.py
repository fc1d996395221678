"""The Redis Cluster form of the store's URL, ``redis-cluster://[USER:PASSWORD@]HOST:PORT[,…]``,
and over TLS ``rediss-cluster://…[?ssl_ca_certs=CA&ssl_certfile=CERT&ssl_keyfile=KEY]``
(the server verified against the system's CAs, or ``ssl_ca_certs``; a client certificate
for mutual TLS). Any other query is refused, never dropped.

Read without importing redis-py's cluster client: hub.yaml is checked in gunicorn's
master, which must not import what imports ``ssl`` before gevent patches it.
"""
from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

SCHEME = "redis-cluster"
TLS_SCHEME = "rediss-cluster"
TLS_QUERY = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")


def is_cluster(url: str) -> bool:
    return url.startswith((SCHEME + "://", TLS_SCHEME + "://"))


def tls_settings(url: str) -> dict:
    """redis-py's TLS settings of a cluster URL: none for ``redis-cluster://``; ``ssl`` and
    the query's ``TLS_QUERY`` for ``rediss-cluster://`` (checked by ``cluster_nodes``)."""
    if not url.startswith(TLS_SCHEME + "://"):
        return {}
    query = parse_qs(url.partition("?")[2])
    return {"ssl": True, **{name: values[0] for name, values in query.items()}}


def _check_query(scheme: str, query: str) -> None:
    """A query without a field (``?``, ``?&``) is none, as in every form of the store's
    URL; ``redis-cluster://`` takes no field, ``rediss-cluster://`` ``TLS_QUERY``'s."""
    fields = parse_qs(query, keep_blank_values=True) if query else {}
    if scheme == SCHEME and fields:
        raise ValueError("a redis-cluster URL takes no query (rediss-cluster:// for TLS)")
    if set(fields) - set(TLS_QUERY) or any(len(v) > 1 or not v[0] for v in fields.values()) \
            or "#" in query:
        raise ValueError("a rediss-cluster URL's query takes ssl_ca_certs, ssl_certfile and "
                         "ssl_keyfile only, each once")


def cluster_nodes(url: str) -> tuple[list[tuple[str, int]], str | None, str | None]:
    """The ``(host, port)`` pairs, username and password of a ``redis-cluster://`` or
    ``rediss-cluster://`` URL.

    Raises ValueError for anything else (never echoing the URL: it may carry a password)."""
    scheme, sep, rest = url.partition("://")
    if scheme not in (SCHEME, TLS_SCHEME) or not sep:
        raise ValueError("not a redis-cluster:// URL")
    rest, _, query = rest.partition("?")
    _check_query(scheme, query)
    netloc, _, path = rest.partition("/")
    if path.strip("/") not in ("", "0"):
        raise ValueError("a Redis Cluster has only database 0")
    user = password = None
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        user, _, password = auth.partition(":")
        user, password = unquote(user) or None, unquote(password) or None
    try:
        nodes = [host_port(address) for address in netloc.split(",")]
    except ValueError:
        raise ValueError("each node is HOST:PORT") from None
    return nodes, user, password


def host_port(address: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT`` as a URL's authority reads (an IPv6 address in
    brackets, ``[::1]:6379``; a port 1-65535), the Cluster's and the Sentinel form's hosts
    alike; ValueError (never echoing it) for anything else: ``::1:6379``, a bracket left
    open, no port."""
    try:
        parts = urlsplit("//" + address)
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or not port:
        raise ValueError("not HOST:PORT")
    return host, port
