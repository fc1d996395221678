"""Step 5: anything but a POST / with content-type application/json and a body is 404."""
from __future__ import annotations

import logging

from murmur_wsgi.errors import NotFound

logger = logging.getLogger(__name__)

MAX_BODY = 64 * 1024 * 1024


def read_body(environ: dict) -> bytes:
    """Return the request body of a JSON-RPC POST /, or raise NotFound."""
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
        body = stream.read(min(size, MAX_BODY)) if size > 0 else b""
    elif environ.get("wsgi.input_terminated"):
        body = stream.read(MAX_BODY)
    else:
        body = b""
    if not body:
        raise NotFound()
    return body
