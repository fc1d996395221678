"""Reading a request's body, bounded: never a byte past the limit, never a blocking read.

A body whose Content-Length passes the limit is refused before a byte is read;
one without a Content-Length (chunked) is read only where the server says the
input ends (``wsgi.input_terminated``, as gunicorn and Werkzeug's server set it
for a chunked body), and refused as soon as the read passes the limit. A
Content-Length that is not a number reads as no body. Each application
answers a refusal its own way (both 413 with -32600 and id null).
"""
from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def read_body(environ: dict, max_bytes: int) -> bytes | None:
    """The request's body (``b""`` without one), or None when it is larger than ``max_bytes``."""
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH")
    if length:
        try:
            size = int(length)
        except ValueError:
            return b""
        if size > max_bytes:
            logger.info("refused a request body declaring %d bytes; limits.max_body_bytes is %d",
                        size, max_bytes)
            return None
        return stream.read(size) if size > 0 else b""
    if not environ.get("wsgi.input_terminated"):
        return b""
    body = stream.read(max_bytes + 1)           # one byte past the limit tells it is passed
    if len(body) > max_bytes:
        logger.info("refused a request body of more than %d bytes (no Content-Length); "
                    "limits.max_body_bytes is %d", max_bytes, max_bytes)
        return None
    return body
