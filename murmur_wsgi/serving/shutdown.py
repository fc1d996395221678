"""The stopping worker: close the applications, shut idle keep-alive connections.

On SIGTERM gunicorn's gevent worker stops accepting and then waits up to
``graceful_timeout`` for its connections to end. Held requests, streams and
idle keep-alive connections would all wait it out, so ``WorkerStop``
(installed by each application's ``post_worker_init``) closes the
application as soon as the worker starts stopping, and shuts the
connections that wait between requests. The close runs from the worker's
own loop (its ``notify()``), never inside a signal handler.

Each application's gunicorn conf subclasses it and says what closing is
(``close_apps``): the door closes its doors, the hub drains its hubs.
"""
from __future__ import annotations

import logging

from murmur_wsgi.serving.connection import shut

logger = logging.getLogger(__name__)


class WorkerStop:
    """Closes the worker's applications, and its idle keep-alive connections, as it stops.

    Installed on the worker instance (its class is untouched): ``handle`` and
    ``handle_request`` track which connections are inside a request;
    ``notify`` (called every second by the gevent worker's loop, also while
    it drains) closes the applications and shuts the idle connections once the
    worker is no longer alive; ``run`` closes them on its way out when no
    connection was left to drain. A connection that finishes a request after
    the worker stopped is closed rather than kept alive.
    """

    def __init__(self, worker):
        self.worker = worker
        self.connections = {}        # client socket -> inside a request (the worker's greenlets)
        self.closed = False

    def close_apps(self) -> None:
        """Close the worker's applications (called once)."""

    def install(self) -> None:
        worker = self.worker
        worker.murmur_stop = self
        from gunicorn.workers.base_async import AsyncWorker

        if isinstance(worker, AsyncWorker):
            # gevent's (and eventlet's) worker: one handle() per connection, one
            # handle_request() per request. Other workers only get the apps closed.
            self._handle, worker.handle = worker.handle, self.handle
            self._handle_request, worker.handle_request = (worker.handle_request,
                                                           self.handle_request)
        self._notify, worker.notify = worker.notify, self.notify
        self._run, worker.run = worker.run, self.run

    def handle(self, listener, client, addr):
        self.connections[client] = False
        try:
            return self._handle(listener, client, addr)
        finally:
            self.connections.pop(client, None)

    def handle_request(self, listener_name, req, sock, addr):
        self.connections[sock] = True
        try:
            result = self._handle_request(listener_name, req, sock, addr)
        finally:
            if sock in self.connections:
                self.connections[sock] = False
        if not self.worker.alive:
            raise StopIteration()       # stopping: end this keep-alive connection now
        return result

    def notify(self):
        self._notify()
        if not self.worker.alive:
            self.stopping()

    def run(self):
        try:
            self._run()
        finally:
            self.close()

    def stopping(self) -> None:
        """The worker stops: close the applications (once), then shut idle connections."""
        self.close()
        for sock, busy in list(self.connections.items()):
            if not busy:
                shut(sock)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_apps()


def worker_int(worker):
    """SIGINT or SIGQUIT, gunicorn's quick stop: close the applications before the worker exits."""
    stop = getattr(worker, "murmur_stop", None)
    if stop is not None:
        stop.stopping()
