"""``murmur-wsgi hub --dev``: Werkzeug's threaded development server, and how it stops.

Its refusals of requests it cannot read (a bad request line, a version it does not
speak) are the hub's JSON (``hub/unreadable.py``), as under gunicorn.
"""
from __future__ import annotations

import logging
import signal
import threading

from werkzeug.serving import WSGIRequestHandler, make_server

from murmur_wsgi.hub.unreadable import refusal

logger = logging.getLogger(__name__)


class JsonRefusals(WSGIRequestHandler):
    """Werkzeug's request handler, its refusals of unreadable requests in JSON."""

    def send_error(self, code, message=None, explain=None) -> None:
        reason, headers, body = refusal(code, self.responses.get(code, ("Error",))[0])
        self.log_error("code %d, message %s", code, message)
        self.close_connection = True
        # NOTE: a line it could not read is taken for HTTP/0.9's, answered without a head:
        # the status and headers are written all the same, as gunicorn writes them.
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.1"
        self.send_response(code, reason)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(body)


def serve_dev(hub, host: str, port: int) -> int:
    """Werkzeug's threaded server; SIGTERM/SIGINT drain the hub, then stop serving."""
    server = make_server(host, port, hub, threaded=True, request_handler=JsonRefusals)

    def stop(signum, frame):
        logger.info("%s: draining the hub", signal.Signals(signum).name)
        threading.Thread(target=lambda: (hub.close(), server.shutdown()), daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    logger.info("serving the hub on http://%s:%d (Werkzeug, threaded)", host, server.port)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
