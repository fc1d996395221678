"""The hub's ``/metrics``: what every worker of this host counted, added up.

prometheus_client's multiprocess mode: under ``murmur-wsgi hub`` the gunicorn
master gives its workers one directory (``PROMETHEUS_MULTIPROC_DIR``, made
before they fork, see hub/gunicorn_conf.py); each worker writes its values
there and the page reads them all (``MultiProcessCollector``), so any worker
answers for the host. Without that variable (one process, embedded, tests) a
hub counts in its own registry; in multiprocess mode the hubs of one process count in
the same values (the page is the host's anyway). ``metrics.enabled`` (false) serves the page;
it counts every tenant's requests, so it takes an operator's JWT only.

Concurrency: prometheus_client's values take their own locks.
"""
from __future__ import annotations

import os
import threading

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, \
    generate_latest, multiprocess

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
METRICS_PATH = "/metrics"
OTHER = "other"


class _Values:
    """The counted values and the registry holding them."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("murmur_hub_requests", "JSON-RPC requests the hub answered, "
                                "by method", ["method"], registry=self.registry)
        self.runs = Counter("murmur_hub_runs", "Runs started", registry=self.registry)
        self.in_flight = Gauge("murmur_hub_runs_in_flight", "Runs in flight",
                               registry=self.registry, multiprocess_mode="livesum")
        self.overdue = Gauge("murmur_hub_runs_overdue", "Runs whose task has ended (its "
                             "timeout, the drain, the sweep) while their agent still "
                             "executes, holding its tenant's concurrency slot",
                             registry=self.registry, multiprocess_mode="livesum")


# Multiprocess mode: the one set of values of this process, which all its hubs count in.
_process_values: list = []          # guarded by _process_lock
_process_lock = threading.Lock()


def _values() -> _Values:
    """A hub's values: its own; in multiprocess mode, the process's.

    NOTE: a multiprocess value is a slot of the process's file, which each value object
    writes whole from its own copy: two hubs of one process with a counter each wrote
    over each other's counts (3 runs on one, 2 on the other: the page said 2)."""
    if not os.environ.get(MULTIPROC_ENV):
        return _Values()
    with _process_lock:
        if not _process_values:
            _process_values.append(_Values())
        return _process_values[0]


class HubMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, methods):
        self.methods = frozenset(methods)
        values = _values()
        self.registry = values.registry
        self.requests, self.runs = values.requests, values.runs
        self.in_flight, self.overdue = values.in_flight, values.overdue

    def request(self, method: str) -> None:
        self.requests.labels(method if method in self.methods else OTHER).inc()

    def run_started(self) -> None:
        self.runs.inc()
        self.in_flight.inc()

    def run_ended(self) -> None:
        self.in_flight.dec()

    def run_overdue(self, delta: int) -> None:
        self.overdue.inc(delta)

    def render(self) -> bytes:
        """The page: every worker's values when multiprocess, else this hub's."""
        if os.environ.get(MULTIPROC_ENV):
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry)
        return generate_latest(self.registry)
