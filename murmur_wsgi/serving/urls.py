"""The URLs a card announces, made valid (RFC 3986) from what names them.

A path the application is mounted at comes percent-decoded (WSGI's
``SCRIPT_NAME``), and a configured public URL may hold characters a URL
cannot (a space, ``é``, ``<``, an internationalized host): both are escaped
here, and a URL valid already is kept byte for byte. A request's ``Host`` is
the client's: one that is not a URL's host (and port) is not announced.
"""
from __future__ import annotations

import re
from urllib.parse import quote, urlsplit, urlunsplit

# RFC 3986's path characters besides the unreserved ones quote() never escapes: the
# sub-delims, ":" and "@" of a segment, and "/" between segments.
_PATH_SAFE = "/!$&'()*+,;=:@"
_BARE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
# RFC 3986's authority without userinfo: an IP literal or a registered name, and a port.
_AUTHORITY = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})+)"
                        r"(?::[0-9]{0,5})?\Z")


def is_authority(host: str) -> bool:
    """Whether a request's ``Host`` can stand in a URL as it is (RFC 3986's host and port)."""
    return bool(_AUTHORITY.match(host))


def script_path(script_name: str) -> str:
    """SCRIPT_NAME as a URL's path (RFC 3986): WSGI gives it percent-decoded, a character a
    byte (PEP 3333), so each byte outside the path's characters is percent-encoded, ``%``
    too (an embedding that set it as text outside latin-1: its UTF-8)."""
    try:
        raw = script_name.encode("latin-1")
    except UnicodeEncodeError:
        raw = script_name.encode("utf-8", "surrogatepass")
    return quote(raw, safe=_PATH_SAFE)


def announced_url(url: str) -> str:
    """A configured public URL as a valid URL (RFC 3986): an internationalized host in its
    ASCII form (IDNA), each character of the path outside RFC 3986's percent-encoded as
    UTF-8; an escape already there is kept, and a URL valid already is kept byte for byte."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if not netloc.isascii():
        try:
            netloc = netloc.encode("idna").decode("ascii")
        except UnicodeError:
            netloc = quote(netloc, safe=_PATH_SAFE.replace("/", "") + "[]")
    path = quote(_BARE_PERCENT.sub("%25", parts.path), safe=_PATH_SAFE + "%")
    if (netloc, path) == (parts.netloc, parts.path):
        return url
    return urlunsplit(parts._replace(netloc=netloc, path=path))
