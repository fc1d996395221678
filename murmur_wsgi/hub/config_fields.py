"""The hub's own kinds of configuration value: the public URL its cards announce, the path
it is mounted at, and an operator's ``pkg.module:callable``."""
from __future__ import annotations

import re
from urllib.parse import urlsplit

from marshmallow import ValidationError, fields, validate

# NOTE: \Z, not $: "$" matches before a final newline, and read "name\n" as a name.
CALLABLE = re.compile(r"^[\w.]+:[\w.]+\Z")
MOUNT_SEGMENT = re.compile(r"^(/[A-Za-z0-9._~-]+)+\Z")


class PublicUrl(fields.Field):
    """http or https, a host (and port) only: no path, query, fragment or credentials.

    The host is a name of letters, digits, ``-``, ``_`` and ``.`` (or an IDN) or an IP
    address, and the port 1-65535: the door's ``network.public_url`` rule (marshmallow's
    URL), ``_`` besides. The cards announce the value as it is."""

    _url = validate.URL(relative=False, require_tld=False, schemes={"http", "https"})

    def _deserialize(self, value, attr, data, **kwargs):
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValidationError("must be an http or https URL")
        if any(ch.isspace() or not ch.isprintable() for ch in value):
            # NOTE: never echoed: a newline would split the one line of the refusal.
            raise ValidationError("must not hold spaces or control characters")
        try:
            parts = urlsplit(value)
            if parts.username is not None or parts.password is not None:
                # NOTE: never echoed: the refusal goes to a terminal or a CI log.
                raise ValidationError("must not carry credentials (user:password@): the "
                                      "cards announce it to every client")
            port = parts.port
        except ValueError:
            raise ValidationError(f"'{value}' is not a URL") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationError(f"'{value}' must be http:// or https:// and a host")
        if parts.path not in ("", "/") or parts.query or parts.fragment or "?" in value \
                or "#" in value:
            raise ValidationError(f"'{value}' must be a host only: no path, query or fragment")
        try:
            # NOTE: a host name may hold "_" (a container's service name: http://murmur_hub),
            # which resolvers and clients take and marshmallow's rule does not.
            self._url(value.replace("_", "-"))
            reachable = port != 0
        except ValidationError:
            reachable = False
        if not reachable:
            raise ValidationError(f"'{value}' must name a host (letters, digits, -, _ and .) or "
                                  "an IP address, and a port from 1 to 65535")
        return value.rstrip("/")


class MountPath(fields.String):
    """The path the hub is mounted at (``/hub``), or "" at the root: segments of URL
    characters, no query, fragment, ``.`` or ``..`` segment; a final ``/`` is dropped."""

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs).rstrip("/")
        if value == "":
            return ""
        segments = value.split("/")
        if segments[0] != "" or not MOUNT_SEGMENT.match(value) or \
                any(seg in ("", ".", "..") for seg in segments[1:]):
            raise ValidationError(f"'{value}' must be a path like /hub (segments of letters, "
                                  "digits and - . _ ~, no query)")
        return value


class Callable(fields.String):
    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if not CALLABLE.match(value):
            raise ValidationError('must be "pkg.module:callable"')
        return value
