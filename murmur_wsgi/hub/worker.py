"""The hub's gunicorn worker: the shared deadline worker, with hub.yaml's deadlines, and
gunicorn's own refusals answered in JSON.

``hub/gunicorn_conf.py`` names it (``worker_class``). What the worker does
(read deadlines, a reserve of connections, write cuts) is
``serving/worker.py``'s; the hub passes ``limits.header_timeout_secs`` and
``limits.body_timeout_secs`` from the hub.yaml it serves (10 s and 30 s by
default). A cut is logged by the worker; the hub's ``/metrics`` has no count
of them.

gunicorn refuses a request it cannot read before the hub sees it (a bad
request line or header 400, a URI too long 414, headers too large 431, a
Transfer-Encoding it does not know 501) with an HTML page. The hub's worker
keeps gunicorn's status and answers ``{"error": "<its reason>"}``, as
the hub's other HTTP refusals (``hub/errors.py``), with the headers of every
``/a2a/v1`` answer (the path is not known when the request line is not). The
door's worker keeps gunicorn's page: the door's wire is its text's.
"""
from __future__ import annotations

import re

from gunicorn import util

from murmur_wsgi.hub.unreadable import refusal
from murmur_wsgi.serving.worker import DeadlineWorker

_STATUS_LINE = re.compile(rb"HTTP/1\.1 ([1-5][0-9][0-9]) ([\x20-\x7e]*)\r\n")


class _Kept:
    """A connection's stand-in while gunicorn writes its refusal: what it writes is kept,
    not sent; everything else is the connection's."""

    def __init__(self, sock):
        self._sock = sock
        self.data = b""

    def gettimeout(self) -> float:
        return 0.0                      # gunicorn's write_nonblock: no blocking to undo

    def sendall(self, data) -> None:
        self.data += bytes(data)

    def __getattr__(self, name):
        return getattr(self._sock, name)


def json_refusal(page: bytes) -> bytes:
    """gunicorn's refusal ``page`` with its status, its body ``{"error": …}``: the status's
    reason (``unreadable.REASONS``, else gunicorn's) in lower case; a page of another shape is kept as
    it is."""
    found = _STATUS_LINE.match(page)
    if found is None:
        return page
    reason, headers, body = refusal(int(found.group(1)), found.group(2).decode("ascii"))
    head = [f"HTTP/1.1 {found.group(1).decode()} {reason}"]
    head += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


class HubWorker(DeadlineWorker):
    """gunicorn's gevent worker with the hub's read deadlines and connection reserve."""

    def limits(self) -> dict:
        from murmur_wsgi.hub.app import live_hubs     # loaded in the worker, not the master

        return next((hub.config.limits for hub in live_hubs()), {})

    def handle_error(self, req, client, addr, exc):
        """gunicorn's refusal (its status, its log lines), written as JSON."""
        kept = _Kept(client)
        super().handle_error(req, kept, addr, exc)
        if not kept.data:
            return
        try:
            util.write_nonblock(client, json_refusal(kept.data))
        except Exception:  # noqa: BLE001 - the client left: as gunicorn's own write
            self.log.debug("Failed to send error message.")
