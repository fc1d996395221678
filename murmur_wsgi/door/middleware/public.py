"""Step 1: what is served without a door token: the card, the peer plane, the control surface."""
from __future__ import annotations

import logging

from werkzeug.http import http_date, parse_etags

from murmur_wsgi.errors import NotFound, PlaneRefusal
from murmur_wsgi.uris import CARD_PATH, PEER_PLANE

logger = logging.getLogger(__name__)

CARD_MAX_AGE = 60


def route(environ: dict, door) -> tuple | None:
    """Answer a public route as (status, headers, body), or None to go on."""
    path = environ.get("PATH_INFO", "/")
    if path == CARD_PATH and environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
        return card(environ, door)
    if path == PEER_PLANE or path.startswith(PEER_PLANE + "/"):
        # NOTE: exports.peer_files is not served by this door; its plane is undeclared.
        raise PlaneRefusal(404, "no_peer_plane", "this capsule declares no peer plane")
    if path == "/control" or path.startswith("/control/"):
        raise NotFound("this capsule declares no control surface")
    return None


def card(environ: dict, door) -> tuple:
    """Serve the public card with Cache-Control, ETag and Last-Modified; 304 on a match."""
    body, etag, _ = door.cards.get(door.base_url(environ))
    headers = [("Content-Type", "application/json"),
               ("Cache-Control", f"public, max-age={CARD_MAX_AGE}"),
               ("ETag", f'"{etag}"'),
               ("Last-Modified", http_date(door.session.started_at))]
    match = environ.get("HTTP_IF_NONE_MATCH")
    if match and parse_etags(match).contains_weak(etag):
        return "304 Not Modified", headers[1:], b""
    headers.append(("Content-Length", str(len(body))))
    if environ.get("REQUEST_METHOD") == "HEAD":
        return "200 OK", headers, b""
    return "200 OK", headers, body
