"""Step 5: anything but a POST / with content-type application/json and a body is 404.

A body larger than ``limits.max_body_bytes`` is answered 413 with -32600 and
id null: refused from its Content-Length before a byte is read, or, without
one (chunked), as soon as the read passes the limit. It is never cut. A body past
the limit of a host the door is mounted in is answered the same (the door's text
names no number). The reading is the shared ``serving/body.py``'s.
"""
from __future__ import annotations

import logging

from murmur_wsgi.errors import BodyTooLargeError, InternalError, NotFound
from murmur_wsgi.serving import body as bodies
from murmur_wsgi.serving.ows import OWS

logger = logging.getLogger(__name__)


def read_body(environ: dict, max_bytes: int) -> bytes:
    """Return the request body of a JSON-RPC POST /, or raise NotFound or BodyTooLargeError."""
    if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO", "/") not in ("/", ""):
        raise NotFound()
    mimetype = environ.get("CONTENT_TYPE", "").partition(";")[0].strip(OWS).lower()
    if mimetype != "application/json":
        raise NotFound()
    try:
        body = bodies.read_body(environ, max_bytes)
    except bodies.PastHostsLimit:
        raise BodyTooLargeError() from None
    except bodies.BodyUnreadable:
        # NOTE: the reference's -32603 for a request the door could not hand to the session,
        # as its catch-all answered it; the reader logged the client's framing in one line
        # (the catch-all logged a traceback as the door's own failure, for anyone's request).
        raise InternalError() from None
    if body is None:
        raise BodyTooLargeError()
    if not body:
        raise NotFound()
    return body
