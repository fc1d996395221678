"""The hub's answer to a request its HTTP server cannot read, in JSON.

gunicorn (``hub/worker.py``) and Werkzeug's development server (``hub/dev_server.py``)
refuse a request they cannot read (a bad request line or header, a URI or
headers too long, a transfer coding they do not know) before the hub sees it,
each with an HTML page of its own. The hub keeps their status and answers
``{"error": "<its reason>"}``, as its other HTTP refusals (``hub/errors.py``),
with the headers of every ``/a2a/v1`` answer (the path is not known when the
request line is not), and closes the connection.
"""
from __future__ import annotations

from murmur_wsgi.hub.errors import A2A_HEADERS
from murmur_wsgi.wire.encode import compact_utf8

# RFC 9110's reason phrases of the statuses the servers refuse with (gunicorn writes "Bad
# Request" beside its 500 and 501).
REASONS = {400: "Bad Request", 403: "Forbidden", 408: "Request Timeout", 414: "URI Too Long",
           417: "Expectation Failed", 431: "Request Header Fields Too Large",
           500: "Internal Server Error", 501: "Not Implemented",
           505: "HTTP Version Not Supported"}


def refusal(status: int, reason: str) -> tuple[str, list[tuple[str, str]], bytes]:
    """``(reason, headers, body)`` of the JSON answer with ``status``: the reason RFC 9110
    gives it (``reason``, the server's own, for a status not in ``REASONS``)."""
    reason = REASONS.get(status) or reason
    body = compact_utf8({"error": reason.lower()}).encode()
    headers = [("Connection", "close"), ("Content-Type", "application/json"),
               ("Content-Length", str(len(body))), *A2A_HEADERS]
    return reason, headers, body

