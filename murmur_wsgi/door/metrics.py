"""What the door counts about itself, its access log, and the Prometheus ``/metrics`` page.

``Metrics.request()`` runs once per request (dispatch.py): a counter by
method and outcome, a latency histogram by method, and the access record
(``logs.py``) when that logger is enabled. ``render()`` writes the text
exposition format (0.0.4) with prometheus_client, the hub's writer too. ``route()`` answers
``GET /metrics`` in the HTTP tier (``dispatch.http_tier``, after the token and
peer steps) when the manifest says ``observability.metrics: true``; on an
authenticated door it takes the operator's token only.

Concurrency:
    ``_lock`` guards the counters, the histograms and ``held``; each
    update is a few dict operations under it. The gauges read from the
    session (tasks, streams, events) are read when the page is rendered.
"""
from __future__ import annotations

import bisect
import math
import re
import threading
import time
from collections import Counter

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, \
    HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from murmur_wsgi import logs
from murmur_wsgi.door.context import CallContext
from murmur_wsgi.errors import InsufficientScope
from murmur_wsgi.door.methods import METHODS, PUSH_METHODS
from murmur_wsgi.door.tasks.record import ALL_STATES
from murmur_wsgi.uris import CARD_PATH

METRICS_PATH = "/metrics"
METHOD_KEY = "murmur_wsgi.method"       # environ: the JSON-RPC method, once the envelope is read
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds. Held requests and long tasks need the upper buckets.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
           30.0, 60.0, 120.0, 300.0, 600.0)
# The label values of ``method``: a served method's name, or one of these; never what a
# client sent otherwise (an unknown name would be a new series per request).
KNOWN_METHODS = frozenset(METHODS) | PUSH_METHODS
NONE, OTHER = "none", "other"
_TASK_ID = re.compile(r'\{"task":\{"id":"([^"\\]{1,80})"')
CUT_REASONS = ("header_timeout", "body_timeout", "write_timeout", "reserve")
LOGGED_NAME = 80                        # a method name is logged up to this many characters


def method_label(environ: dict, name: str | None) -> str:
    """The ``method`` label: the JSON-RPC method, or the HTTP route it was answered on."""
    if name is not None:
        return name if name in KNOWN_METHODS else OTHER
    path = environ.get("PATH_INFO") or "/"
    if path == CARD_PATH:
        return "agent-card"
    if path == METRICS_PATH:
        return "metrics"
    if path.startswith("/resources/"):
        return "resources"
    return NONE


def task_id_of(call, result) -> str | None:
    """The task a request was about, when the request or its answer names one."""
    if call is None:
        # An error answer: an A2A error names its task in its metadata (-32001, -32002, …).
        found = (getattr(result, "metadata", None) or {}).get("taskId")
        return found if isinstance(found, str) else None
    params = call.params if isinstance(call.params, dict) else {}
    found = params.get("id")
    message = params.get("message")
    if found is None and isinstance(message, dict):
        found = message.get("taskId")
    if found is None and isinstance(result, str):
        match = _TASK_ID.match(result)
        found = match.group(1) if match else None
    if found is None:
        found = getattr(result, "_follow", None)     # an EventStream that follows a task
    return found if isinstance(found, str) else None


class _Histogram:
    __slots__ = ("counts", "total", "count")

    def __init__(self):
        self.counts = [0] * (len(BUCKETS) + 1)        # per bucket, the last one +Inf
        self.total = 0.0
        self.count = 0


class Metrics:
    """Request counts and latencies of one door; its access log switch.

    Held requests are counted by the task manager, under the lock they wait on.
    """

    def __init__(self, access_log: bool = False, counting: bool = True):
        self.counting = counting            # PERF: off when no /metrics page reads the counts
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str], int] = {}     # guarded by _lock
        self.latency: dict[str, _Histogram] = {}           # guarded by _lock
        self.cuts: Counter = Counter()                     # guarded by _lock
        self.access_log = access_log

    def request(self, environ: dict, call, outcome: str, status: int, started: float,
                result=None) -> None:
        """Count one answered request (a stream: once its headers are written), and log it."""
        if not (self.counting or self.access_log):
            return
        seconds = time.perf_counter() - started
        name = environ.get(METHOD_KEY)
        label = method_label(environ, name)
        if self.counting:
            self._count(label, outcome, seconds)
        if self.access_log and logs.access_enabled():
            logs.log_access({
                "method": name[:LOGGED_NAME] if isinstance(name, str) else label,
                "task_id": task_id_of(call, result), "status": status, "outcome": outcome,
                "duration_ms": round(seconds * 1000, 3),
                "path": environ.get("SCRIPT_NAME", "") + (environ.get("PATH_INFO") or ""),
                "remote_addr": environ.get("REMOTE_ADDR")})

    def _count(self, label: str, outcome: str, seconds: float) -> None:
        slot = bisect.bisect_left(BUCKETS, seconds)
        key = (label, outcome)
        with self._lock:
            self.requests[key] = self.requests.get(key, 0) + 1
            hist = self.latency.get(label)
            if hist is None:
                hist = self.latency[label] = _Histogram()
            hist.counts[slot] += 1
            hist.total += seconds
            hist.count += 1

    def cut(self, reason: str) -> None:
        """Count a connection the server cut (a deadline, the reserve): ``worker.py``."""
        with self._lock:
            self.cuts[reason] += 1

    def snapshot(self) -> tuple[dict, dict]:
        """Copies of (requests, latency histograms) taken under the lock."""
        with self._lock:
            latency = {label: (list(h.counts), h.total, h.count)
                       for label, h in self.latency.items()}
            return dict(self.requests), latency


# --- the exposition format: prometheus_client's, as the hub's page ---------------------


class _DoorCollector:
    """One scrape of a door: its session's gauges and its request counts.

    The counts stay this module's (a few dict operations per request, see
    ``Metrics``); prometheus_client writes them, the same writer as the hub's page.
    """

    def __init__(self, door):
        self.door = door

    def collect(self):
        door = self.door
        session = door.session
        requests, latency = door.metrics.snapshot()
        states = Counter(record.state for record in session.store.snapshot())
        tasks = GaugeMetricFamily("murmur_tasks", "Tasks the session holds, by state.",
                                  labels=["state"])
        for state in sorted(ALL_STATES):
            tasks.add_metric([state], states.get(state, 0))
        yield tasks
        yield CounterMetricFamily(
            "murmur_tasks_evicted",
            "Finished tasks dropped to tasks.keep_finished or keep_finished_secs.",
            value=session.store.evicted)
        yield GaugeMetricFamily(
            "murmur_open_streams",
            "Open event streams (SendStreamingMessage, SubscribeToTask, WatchSession).",
            value=session.open_streams())
        yield GaugeMetricFamily("murmur_held_requests",
                                "Requests waiting inside their method: held SendMessage calls.",
                                value=session.manager.held)
        yield GaugeMetricFamily("murmur_background_commands",
                                "Background commands still running.",
                                value=len(session.works.running()))
        yield CounterMetricFamily("murmur_events_published",
                                  "Events written to the session's event log.",
                                  value=session.ring.published)
        yield CounterMetricFamily(
            "murmur_events_dropped",
            "Events slow stream readers missed (each reported to them as lagged).",
            value=session.ring.dropped)
        yield GaugeMetricFamily("murmur_session_closing", "1 once the session is closing.",
                                value=int(bool(session.closing)))
        cuts = CounterMetricFamily(
            "murmur_connections_cut",
            "Connections cut: a deadline passed (header_timeout, body_timeout, "
            "write_timeout) or the reserve closed an idle one (reserve).", labels=["reason"])
        with door.metrics._lock:
            counted = dict(door.metrics.cuts)
        for reason in CUT_REASONS:
            cuts.add_metric([reason], counted.get(reason, 0))
        yield cuts
        answered = CounterMetricFamily("murmur_requests",
                                       "Requests answered, by method and outcome.",
                                       labels=["method", "outcome"])
        for (label, outcome), count in sorted(requests.items()):
            answered.add_metric([label, outcome], count)
        yield answered
        durations = HistogramMetricFamily(
            "murmur_request_duration_seconds",
            "Seconds to answer, by method; a stream counts until its headers are written.",
            labels=["method"])
        for label, (counts, total, _count) in sorted(latency.items()):
            running, buckets = 0, []
            for bound, hits in zip(BUCKET_LABELS, counts):
                running += hits
                buckets.append((bound, running))
            durations.add_metric([label], buckets, total)
        yield durations


BUCKET_LABELS = tuple(floatToGoString(bound) for bound in BUCKETS + (math.inf,))


def render(door) -> str:
    """The door's metrics in the Prometheus text format (prometheus_client's writer)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_DoorCollector(door))
    return generate_latest(registry).decode()


def route(environ: dict, ctx: CallContext, door) -> tuple | None:
    """``GET /metrics`` (HTTP tier, after steps 2 and 3): the page, or None to go on.

    Served when the manifest says ``observability.metrics: true``; on an
    authenticated door, to the operator's token only.
    """
    if not door.serves_metrics or environ.get("PATH_INFO") != METRICS_PATH \
            or environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
        return None
    if door.tokens.enabled and not ctx.credential.sees_all:
        # NOTE: the page counts every credential's tasks: only the operator reads it.
        raise InsufficientScope(ctx.credential.name, "metrics", door.tokens.realm)
    data = render(door).encode()
    headers = [("Content-Type", CONTENT_TYPE), ("Cache-Control", "no-store"),
               ("Content-Length", str(len(data)))]
    return "200 OK", headers, b"" if environ.get("REQUEST_METHOD") == "HEAD" else data
