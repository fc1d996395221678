"""The hub's gunicorn worker: the shared deadline worker, with hub.yaml's deadlines.

``hub/gunicorn_conf.py`` names it (``worker_class``). What the worker does
(read deadlines, a reserve of connections, write cuts) is
``serving/worker.py``'s; the hub passes ``limits.header_timeout_secs`` and
``limits.body_timeout_secs`` from the hub.yaml it serves (10 s and 30 s by
default). A cut is logged by the worker; the hub's ``/metrics`` has no count
of them.
"""
from __future__ import annotations

from murmur_wsgi.serving.worker import DeadlineWorker


class HubWorker(DeadlineWorker):
    """gunicorn's gevent worker with the hub's read deadlines and connection reserve."""

    def limits(self) -> dict:
        from murmur_wsgi.hub.app import live_hubs     # loaded in the worker, not the master

        return next((hub.config.limits for hub in live_hubs()), {})
