"""The door's gunicorn worker: the shared deadline worker, with the door's manifest deadlines.

``gunicorn_conf.py`` names it (``worker_class``). What the worker does (read
deadlines, a reserve of connections, write cuts) is ``serving/worker.py``'s;
the door passes ``limits.header_timeout_secs`` and ``limits.body_timeout_secs``
from its manifest and counts each cut on every live door
(``murmur_connections_cut_total{reason}`` on ``/metrics``).
"""
from __future__ import annotations

from murmur_wsgi.serving.worker import DeadlineWorker


class DoorWorker(DeadlineWorker):
    """gunicorn's gevent worker with the door's read deadlines and connection reserve."""

    def limits(self) -> dict:
        from murmur_wsgi.door.app import live_doors

        doors = live_doors()
        return doors[0].manifest.limits if doors else {}

    def count_cut(self, reason: str) -> None:
        from murmur_wsgi.door.app import live_doors

        for door in live_doors():
            door.metrics.cut(reason)
