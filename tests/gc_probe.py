"""What the cyclic collector does in a gunicorn worker, written by gunicorn hooks (no app code).

``tests/gunicorn_gc_probe.py`` (a gunicorn config file: the door's or the hub's settings,
``$GC_PROBE_APP``, plus these hooks) is passed as ``--gunicorn-conf``; the worker
appends JSON lines to ``$GC_PROBE_OUT``:

- ``{"boot": ...}`` at the worker's first request (its boot done): the objects frozen
  (``gc.get_freeze_count()``), the objects tracked (``len(gc.get_objects())``), the
  worker's RSS, and how long a full collection of that heap takes;
- ``{"full": seconds}`` for each full (generation 2) collection CPython starts;
- ``{"exit": ...}`` as the worker exits: the collections of each generation, the
  longest of each and their total seconds, and the objects tracked then.
"""
from __future__ import annotations

import gc
import json
import os
import time

_started: list = []
_counts = [0, 0, 0]
_longest = [0.0, 0.0, 0.0]
_total = [0.0, 0.0, 0.0]
_first = []


def _write(record: dict) -> None:
    path = os.environ.get("GC_PROBE_OUT")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


def _rss() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _timed(phase: str, info: dict) -> None:
    if phase == "start":
        _started[:] = [time.perf_counter()]
        return
    generation = info["generation"]
    _counts[generation] += 1
    if not _started:
        return
    took = time.perf_counter() - _started[0]
    _longest[generation] = max(_longest[generation], took)
    _total[generation] += took
    if generation == 2:
        _write({"full": took})


def watch_collections() -> None:
    """Count and time the collections from now on (``post_worker_init``)."""
    gc.callbacks.append(_timed)


def boot_figures() -> None:
    """Once, at the first request: the boot's heap, and a full collection of it timed."""
    if _first:
        return
    _first.append(True)
    frozen, tracked, rss = gc.get_freeze_count(), len(gc.get_objects()), _rss()
    gc.callbacks.remove(_timed)
    started = time.perf_counter()
    gc.collect()
    full = time.perf_counter() - started
    gc.callbacks.append(_timed)
    _write({"boot": {"frozen": frozen, "tracked": tracked, "rss": rss, "full_secs": full}})


def exit_figures() -> None:
    _write({"exit": {"collections": list(_counts), "longest_secs": list(_longest),
                     "total_secs": list(_total), "tracked": len(gc.get_objects()),
                     "frozen": gc.get_freeze_count(), "rss": _rss()}})
