"""``murmur-wsgi serve --dev``: Werkzeug's threaded development server, and how it stops.

Every request runs on its own thread (real threads, no gevent): a held
request or an open stream keeps its thread until it ends. Werkzeug's server
closes every connection after one response, so there are no idle keep-alive
connections to wait for.

Stopping (SIGTERM, SIGINT, or ``lifecycle.after_task: exit``): the door
closes first — held requests are answered with their task as it stands,
streams write ``capsule-closed`` and end, background commands are killed —
then the server waits up to ``DRAIN_SECS`` for the answers to be written and
stops. A second SIGINT stops at once.

Concurrency:
    The signal handler only starts the stopping thread: closing the door
    takes the session's locks, which the interrupted main thread may hold.
"""
from __future__ import annotations

import logging
import signal
import threading

from werkzeug.serving import WSGIRequestHandler, make_server

logger = logging.getLogger(__name__)

DRAIN_SECS = 10.0     # how long a stop waits for answers still being written


class _QuietHandler(WSGIRequestHandler):
    """Werkzeug's handler without its per-request line: the door writes its own access log."""

    def log_request(self, code="-", size="-") -> None:
        pass


class DevServer:
    """The door on Werkzeug's threaded server; ``stop()`` from any thread."""

    def __init__(self, door, host: str, port: int):
        self.door = door
        self.server = make_server(host, port, door, threaded=True,
                                  request_handler=_QuietHandler)
        self._lock = threading.Lock()
        self._stopping = False          # guarded by _lock
        self.stopped = threading.Event()

    @property
    def port(self) -> int:
        return self.server.server_port

    def serve_forever(self) -> None:
        """Serve until ``stop()``; the door is closed on the way out, whatever ended it."""
        self.door.stop_server = self.stop
        try:
            self.server.serve_forever()
        finally:
            self.server.server_close()
            self.door.close()
            self.stopped.set()

    def stop(self) -> None:
        """Close the door, let the answers be written, stop serving (returns at once)."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
        threading.Thread(target=self._stop, daemon=True, name="murmur-dev-stop").start()

    def _stop(self) -> None:
        self.door.close()
        if not self.door.active.wait_idle(DRAIN_SECS):
            logger.warning("stopping with requests still being answered after %ss", DRAIN_SECS)
        self.server.shutdown()

    def on_signal(self, signum, frame) -> None:
        if signum == signal.SIGINT and self._stopping:
            raise KeyboardInterrupt
        logger.info("%s: closing the door", signal.Signals(signum).name)
        self.stop()


def run(door, host: str, port: int) -> int:
    """Serve ``door`` on ``host:port`` until SIGTERM or SIGINT; return the exit status."""
    dev = DevServer(door, host, port)
    previous = {sig: signal.signal(sig, dev.on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    logger.info("serving %s on http://%s:%d with Werkzeug's development server (threaded)",
                door.session.id, host, dev.port)
    try:
        dev.serve_forever()
    except KeyboardInterrupt:
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
