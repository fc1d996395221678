"""Step 5: anything but a POST / with content-type application/json and a body is 404.

A body larger than ``limits.max_body_bytes`` is answered 413 with -32600 and
id null: refused from its Content-Length before a byte is read, or, without
one (chunked), as soon as the read passes the limit. It is never cut. The
reading is the shared ``serving/body.py``'s.
"""
from __future__ import annotations

import logging

from murmur_wsgi.errors import BodyTooLargeError, NotFound
from murmur_wsgi.serving import body as bodies

logger = logging.getLogger(__name__)


def read_body(environ: dict, max_bytes: int) -> bytes:
    """Return the request body of a JSON-RPC POST /, or raise NotFound or BodyTooLargeError."""
    if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO", "/") not in ("/", ""):
        raise NotFound()
    mimetype = environ.get("CONTENT_TYPE", "").partition(";")[0].strip().lower()
    if mimetype != "application/json":
        raise NotFound()
    body = bodies.read_body(environ, max_bytes)
    if body is None:
        raise BodyTooLargeError()
    if not body:
        raise NotFound()
    return body
