"""Which push configs the hub accepts; every refusal is -32602 (InvalidParamsError).

A config is ``{taskId, id?, url, token?, authentication?}`` (A2A v1.0
TaskPushNotificationConfig). The url is https on an allowed port (443, or
``push.ports``), at most 2048 bytes, without spaces or control characters (C0, DEL,
C1), credentials or fragment, with a path and query of ASCII, and not an IP literal
outside the public internet (its host read as a lookup reads it: IDNA-encoded, so
"１２７.０.０.１" is 127.0.0.1); the token is at most 512 bytes of printable ASCII,
without a space at either end (it is sent as a header, and its ``tokenSha256``
hashes those bytes: a receiver reads the same value whatever charset its server
decodes headers with, and none trims it);
authentication is only ``{"scheme": "Bearer"}``: Authorization always carries
the hub's JWT. A config id is 1-128 of ``A-Z a-z 0-9 . _ ~ -`` (it is part of
the notification's ``jti``, ``<taskId>/<configId>/<seq>``).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from murmur_wsgi.errors import InvalidParamsError
from murmur_wsgi.hub.push import addresses
from murmur_wsgi.ids import random_uuid

logger = logging.getLogger(__name__)

MAX_URL_BYTES = 2048
MAX_TOKEN_BYTES = 512
# A host of numbers only ("2130706433", "127.1", "0x7f.0.0.1"): a resolver reads it as an
# IPv4 address, so it is refused as one that is not written plainly.
NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}\.?$", re.I)
CONFIG_ID = re.compile(r"^[A-Za-z0-9._~-]{1,128}$")
FIELDS = ("tenant", "id", "taskId", "url", "token", "authentication")


@dataclass(frozen=True, slots=True)
class ConfigRequest:
    """An accepted config, before it is stored (``id`` generated when absent)."""

    task_id: str
    id: str
    url: str
    token: str | None


def header_value(value: str) -> bool:
    """Whether ``value`` is written as a header as it is: Latin-1 without control
    characters, a tab aside (http.client raises on the others, quoting the value)."""
    return not any(ord(c) > 0xff or (ord(c) < 0x20 and c != "\t") or ord(c) == 0x7f
                   for c in value)


def token_value(value: str) -> bool:
    """Whether ``value`` may be a config's token: printable ASCII (space included), no
    space at either end. What is written is what every receiver reads and hashes: bytes
    beyond ASCII are decoded as Latin-1 by some servers and as UTF-8 by others (their
    ``tokenSha256`` would differ), and a header's outer spaces are trimmed."""
    return value.isascii() and value.isprintable() and value == value.strip(" ")


def _invalid(where: str, what: str) -> InvalidParamsError:
    return InvalidParamsError(f"Invalid params: {where}{what}")


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _lookup_name(host: str) -> str:
    """``host`` as a lookup reads it: IDNA-encoded when it is not ASCII ("１２７.０.０.１"
    is 127.0.0.1); as it is when it cannot be encoded (it never resolves)."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def check_url(url, ports, allow, where: str = "") -> str:
    """The url if the hub may notify it; else -32602 naming the rule."""
    if not isinstance(url, str) or not url:
        raise _invalid(where, "url is required (an https URL)")
    if _size(url) > MAX_URL_BYTES:
        raise _invalid(where, f"url is longer than {MAX_URL_BYTES} bytes")
    if any(c.isspace() or ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in url):  # C0, C1
        raise _invalid(where, "url must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise _invalid(where, "url is not a URL") from None
    if parts.scheme.lower() != "https":
        raise _invalid(where, "url must be https")
    if not (parts.path + parts.query).isascii():
        raise _invalid(where, "url's path and query must be ASCII (percent-encode the rest)")
    if not parts.hostname:
        raise _invalid(where, "url must name a host")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise _invalid(where, "url must not carry credentials")
    if parts.fragment or "#" in url:
        raise _invalid(where, "url must not have a fragment")
    port = 443 if port is None else port
    if port not in ports:
        allowed = ", ".join(str(p) for p in sorted(ports))
        raise _invalid(where, f"url's port must be one of {allowed}")
    host = _lookup_name(parts.hostname)
    ip = addresses.parse(host)
    if ip is None and NUMERIC_HOST.match(host):
        raise _invalid(where, "url's host is not a valid address")
    if ip is not None and not addresses.reachable(ip, allow):
        raise _invalid(where, "url's host is an address outside the public internet")
    return url


def read_config(params, ports, allow, *, where: str = "", task_id=None) -> ConfigRequest:
    """Read a TaskPushNotificationConfig; ``task_id`` given: it must be absent or that."""
    if not isinstance(params, dict):
        raise _invalid(where.rstrip("."), " must be an object")
    for key in params:
        if key not in FIELDS:
            raise _invalid(where, f"{key} is not a field of TaskPushNotificationConfig")
    tenant = params.get("tenant")
    if tenant is not None and not isinstance(tenant, str):
        raise _invalid(where, "tenant must be a string")
    tid = params.get("taskId")
    if tid is not None and not isinstance(tid, str):
        raise _invalid(where, "taskId must be a string")
    if task_id is None:
        if not tid:
            raise _invalid(where, "taskId is required")
        task_id = tid
    elif tid:
        raise _invalid(where, "taskId must be absent: the config is for this message's task")
    config_id = params.get("id")
    if config_id is None or config_id == "":
        config_id = random_uuid()
    elif not isinstance(config_id, str) or not CONFIG_ID.fullmatch(config_id):
        raise _invalid(where, "id must be 1 to 128 of A-Z a-z 0-9 . _ ~ -")
    url = check_url(params.get("url"), ports, allow, where)
    token = params.get("token")
    if token is not None and not isinstance(token, str):
        raise _invalid(where, "token must be a string")
    if token is not None and _size(token) > MAX_TOKEN_BYTES:
        raise _invalid(where, f"token is longer than {MAX_TOKEN_BYTES} bytes")
    if token is not None and not token_value(token):
        raise _invalid(where, "token must be printable ASCII, without a space at either "
                       "end")
    auth = params.get("authentication")
    if auth is not None:
        if not isinstance(auth, dict):
            raise _invalid(where, "authentication must be an object")
        # NOTE: null and "" are proto3's absent string; any other value (0, false, {}) is
        # one of the client's own, whatever its type.
        if auth.get("credentials") not in (None, ""):
            raise _invalid(where, "authentication must not carry credentials: Authorization "
                           "always carries the hub's JWT")
        if auth.get("scheme") != "Bearer" or set(auth) - {"scheme", "credentials"}:
            raise _invalid(where, 'authentication must be {"scheme": "Bearer"}')
    return ConfigRequest(task_id, config_id, url, token or None)
