"""Step 5: anything but a POST / with content-type application/json and a body is 404.

A body larger than ``limits.max_body_bytes`` is answered 413 with -32600 and
id null: refused from its Content-Length before a byte is read, or, without
one (chunked), as soon as the read passes the limit. It is never cut.
"""
from __future__ import annotations

import logging

from murmur_wsgi.errors import BodyTooLargeError, NotFound

logger = logging.getLogger(__name__)


def _too_large(what: str, max_bytes: int) -> BodyTooLargeError:
    logger.info("refused a request body %s; limits.max_body_bytes is %d", what, max_bytes)
    return BodyTooLargeError()


def read_body(environ: dict, max_bytes: int) -> bytes:
    """Return the request body of a JSON-RPC POST /, or raise NotFound or BodyTooLargeError."""
    if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO", "/") not in ("/", ""):
        raise NotFound()
    mimetype = environ.get("CONTENT_TYPE", "").partition(";")[0].strip().lower()
    if mimetype != "application/json":
        raise NotFound()
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH")
    if length:
        try:
            size = int(length)
        except ValueError:
            raise NotFound() from None
        if size > max_bytes:
            raise _too_large(f"declaring {size} bytes", max_bytes)
        body = stream.read(size) if size > 0 else b""
    elif environ.get("wsgi.input_terminated"):
        body = stream.read(max_bytes + 1)       # one byte past the limit tells it is passed
        if len(body) > max_bytes:
            raise _too_large("of more bytes than that (no Content-Length)", max_bytes)
    else:
        body = b""
    if not body:
        raise NotFound()
    return body
