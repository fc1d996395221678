"""Counters the door keeps about itself (the /metrics writer reads them)."""
from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger(__name__)
access_log = logging.getLogger("murmur_wsgi.access")


class Metrics:
    """Request counts by method and outcome; cheap enough for every request."""

    def __init__(self, log_requests: bool = False):
        self._lock = threading.Lock()
        self.requests: dict[tuple, int] = {}         # guarded by _lock
        self.log_requests = log_requests

    def request(self, method: str | None, outcome: str, started: float) -> None:
        key = (method, outcome)
        with self._lock:
            self.requests[key] = self.requests.get(key, 0) + 1
        if self.log_requests:
            access_log.info("%s %s %.1fms", method, outcome,
                            (time.perf_counter() - started) * 1000)
