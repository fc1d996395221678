"""hub.yaml's store URLs (``store``, ``redis.url``): every Redis form the hub reads, checked as
the file loads, each refusal one line that never echoes the URL (it may carry a password).
"""
from __future__ import annotations

import functools
import os
import re
import ssl
from urllib.parse import parse_qs, unquote, urlsplit

from marshmallow import ValidationError, fields

from murmur_wsgi.hub.store import sentinel_url
from murmur_wsgi.hub.store.cluster_url import TLS_QUERY, cluster_nodes, is_cluster


class StoreField(fields.String):
    """``memory``, ``redis`` (the URL is ``redis.url``), a ``redis://``/``rediss://`` URL, a
    ``unix:///PATH?db=N`` socket of a Redis on this host,
    ``redis-sentinel://HOST:PORT[,HOST:PORT…]/SERVICE/DB[?sentinel_password=…]``
    (``rediss-sentinel://`` over TLS) or ``redis-cluster://HOST:PORT[,HOST:PORT…]``
    (``rediss-cluster://`` over TLS)."""

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if value in ("memory", "redis"):
            return value
        _redis_url(value)
        return value


SOCKET_PATH_BYTES = 107          # a unix socket's address (sun_path) holds 108 with its NUL
_NUMBER = re.compile(r"[0-9]+")


def _redis_url(value: str) -> str:
    """Check a Redis URL (never echoing it: it may carry a password)."""
    if "#" in value:
        # NOTE: a URL's '#' starts its fragment: redis-py and urlsplit drop what follows
        # (a password's end, a query's fields), where the hub's own parsers read it.
        raise ValidationError("a Redis URL holds no #, which starts a URL's fragment: in a "
                              "password, a service's name or a query's value, write it %23")
    _credentials_as_written(value)
    try:
        return _url_form(value)
    except ValidationError:
        before, _, query = value.partition("://")[2].partition("?")
        if "@" in query and "@" not in before:
            # NOTE: the URL's first '?' ends its address: one in the password cut the URL
            # there, and the address read was the password's start.
            raise ValidationError("the URL's password holds a '?', where the URL's query "
                                  "starts: percent-encode it as %3F (and '#' as %23, '@' as "
                                  "%40, '/' as %2F)") from None
        raise


def _url_form(value: str) -> str:
    """Check a Redis URL by its form: a sentinel's, a cluster's, a socket's, or TCP's."""
    if sentinel_url.is_sentinel(value):
        try:
            sentinel_url.parse(value)
        except ValueError as ex:
            raise ValidationError(str(ex)) from None
        _tls_files(value.partition("?")[2])
        return value
    if is_cluster(value):
        try:
            cluster_nodes(value)
        except ValueError as ex:
            raise ValidationError(f"is not a redis-cluster:// (rediss-cluster://) "
                                  f"HOST:PORT[,HOST:PORT…] URL: {ex}") from None
        _tls_files(value.partition("?")[2])
        return value
    if value.startswith("unix:"):
        return _unix_url(value)
    try:
        parts = urlsplit(value)
        parts.port
    except ValueError:
        raise ValidationError("is not a redis:// or rediss:// URL") from None
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ValidationError("must be memory, redis, or a redis://host:port/db, "
                              "rediss://, unix:///path/to/redis.sock?db=0, "
                              "redis-sentinel:// (rediss-sentinel://) host:port/service/db or "
                              "redis-cluster:// (rediss-cluster://) host:port,… URL")
    db = parts.path.strip("/")
    if db and _NUMBER.fullmatch(db) is None:
        raise ValidationError("a Redis URL's path is its database number (redis://host:port/0)")
    _tcp_query(parts.scheme, parts.query)
    return value


def _credentials_as_written(value: str) -> None:
    """Refuse an empty password (``:@``, ``password=``, ``sentinel_password=``) or query
    user: every form reads it as none, so Redis would be asked without one (most often a
    variable left unset where the URL is written); and a ``+`` in a query's password or
    user, which reads as a space."""
    before, _, query = value.partition("://")[2].partition("?")
    auth = before.rpartition("@")[0]
    if ":" in auth and not auth.partition(":")[2]:
        raise ValidationError("the URL's password (between ':' and '@') is empty, which "
                              "reads as none: give it, or leave out the ':'")
    for name, values in parse_qs(query, keep_blank_values=True).items():
        if name.endswith(("password", "username")) and not all(values):
            raise ValidationError(f"the URL's {name} is empty, which reads as none: give it, "
                                  f"or leave out {name}")
    for field in query.split("&"):
        name, _, written = field.partition("=")
        if unquote(name).endswith(("password", "username")) and "+" in written:
            # NOTE: parse_qs (redis-py's, the hub's) reads it as a space: another password.
            raise ValidationError(f"the URL's {unquote(name)} holds a '+', which a URL's "
                                  "query reads as a space: percent-encode it as %2B")


# What a redis:// or rediss:// URL's query may hold: redis-py would take any other as a
# connection setting, and fail each command with TypeError (a typo) or override the hub's
# own (a timeout); ssl_cert_reqs=none would connect unverified.
_QUERY = {"redis": ("db", "username", "password"),
          "rediss": ("db", "username", "password", "ssl_ca_certs", "ssl_certfile",
                     "ssl_keyfile")}


def _tcp_query(scheme: str, query: str) -> None:
    fields = parse_qs(query, keep_blank_values=True)
    allowed = _QUERY[scheme]
    if set(fields) - set(allowed) or any(len(v) > 1 or not v[0] for v in fields.values()):
        raise ValidationError(f"a {scheme}:// URL's query takes {', '.join(allowed)} only, "
                              f"each once" + ("" if scheme == "rediss" else
                                              " (rediss:// for TLS and its ssl_… files)"))
    if any(_NUMBER.fullmatch(db) is None for db in fields.get("db", [])):
        raise ValidationError(f"a {scheme}:// URL's db is its database number "
                              f"({scheme}://host:port/0)")
    _tls_files(query)


def _tls_files(query: str) -> None:
    """Each TLS file a ``rediss://``, ``rediss-cluster://`` or ``rediss-sentinel://`` URL
    names is a file: a missing one would fail every connection (a cluster's, the hub's
    start) with a traceback. So would a key without its certificate (``ssl_keyfile``
    alone: Python's ``ssl`` raises ``TypeError`` as each connection starts TLS). Each is
    then loaded as each connection loads it (``_tls_loaded``)."""
    files = parse_qs(query)
    for name, values in files.items():
        if name.startswith("ssl_") and not os.path.isfile(values[0]):
            raise ValidationError(f"the URL's {name} {values[0]} is not a file")
    if "ssl_keyfile" in files and "ssl_certfile" not in files:
        raise ValidationError("the URL's ssl_keyfile is the key of its ssl_certfile (the "
                              "hub's certificate for mutual TLS), which it lacks")
    _tls_loaded(*(files.get(name, [None])[0] for name in TLS_QUERY))


def _tls_loaded(ca: str | None, cert: str | None, key: str | None) -> None:
    """Load the TLS files into a context as redis-py's connections do
    (``load_verify_locations``, ``load_cert_chain``): a file that cannot be read, is no PEM
    certificate, or a key that is not its certificate's (or is encrypted: the URL gives no
    password of it) would start the hub, then fail every connection, each call -32603."""
    for name, file in (("ssl_ca_certs", ca), ("ssl_certfile", cert)):
        if file is not None:
            _loaded(name, file, "holds no PEM certificate",
                    functools.partial(_context().load_verify_locations, cafile=file))
    if cert is None:
        return
    if key is None:
        name, file, unusable = "ssl_certfile", cert, ("holds no unencrypted PEM key of its "
                                                      "certificate (name it in ssl_keyfile)")
    else:
        name, file, unusable = "ssl_keyfile", key, ("is not the unencrypted PEM key of the "
                                                    f"ssl_certfile {cert}")
    _loaded(name, file, unusable,
            functools.partial(_context().load_cert_chain, cert, key, password=_no_password))


def _context() -> ssl.SSLContext:
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _no_password() -> bytes:
    """An encrypted key's password, asked by ``load_cert_chain``: none (never a prompt)."""
    return b""


def _loaded(name: str, file: str, unusable: str, load) -> None:
    """``load()``, or one line naming ``name`` and ``file``: ``unusable`` (an ``SSLError``)
    or why the file cannot be read."""
    try:
        load()
    except ssl.SSLError:
        raise ValidationError(f"the URL's {name} {file} {unusable}") from None
    except OSError as ex:
        raise ValidationError(f"the URL's {name} {file} cannot be read "
                              f"({ex.strerror or type(ex).__name__})") from None


def _unix_url(value: str) -> str:
    """Check ``unix:///PATH[?db=N]``: a Redis on this host, on its ``unixsocket``."""
    parts = urlsplit(value)
    if not value.startswith("unix:///") or parts.netloc or parts.path.endswith("/"):
        raise ValidationError("a Redis socket's URL is unix:// and the socket's absolute "
                              "path (unix:///run/redis/redis.sock?db=0)")
    if len(os.fsencode(unquote(parts.path))) > SOCKET_PATH_BYTES:
        raise ValidationError(f"a Redis socket's path is at most {SOCKET_PATH_BYTES} bytes")
    query = parse_qs(parts.query, keep_blank_values=True)
    if set(query) - {"db", "username", "password"}:
        raise ValidationError("a Redis socket's URL takes db, username and password only "
                              "(unix:///run/redis/redis.sock?db=0)")
    if any(_NUMBER.fullmatch(db) is None for db in query.get("db", [])):
        raise ValidationError("a Redis socket's db is its database number "
                              "(unix:///run/redis/redis.sock?db=0)")
    return value


class RedisUrl(fields.String):
    def _deserialize(self, value, attr, data, **kwargs):
        if value is None or value == "":
            return None
        return _redis_url(super()._deserialize(value, attr, data, **kwargs))
