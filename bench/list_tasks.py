"""ms per ListTasks page when the store holds many tasks and few of them match.

Fills the door's task store (``door/tasks/store.TaskStore``, no HTTP) with N finished
tasks, as ``tasks.keep_finished_total`` allows at its default: the session's, COMPLETED,
but for 10 of a credential's (``alice``), two of them FAILED. Then times one page of 50
(the store's walk and the totalSize, under its lock, rendering ids only) for each
filter, and for a contextId that ``--context`` of the tasks share (a client that keeps one
conversation). Run it from the repository root:

    .venv/bin/python bench/list_tasks.py [-n 50000] [--context 10000] [--repeat 200]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from murmur_wsgi.door.tasks.record import COMPLETED, FAILED, WORKING, TaskRecord  # noqa: E402
from murmur_wsgi.door.tasks.store import TaskStore                               # noqa: E402


SHARED = "ctx_shared"           # the contextId the last ``context`` tasks share


def fill(n: int, context: int = 0) -> TaskStore:
    store = TaskStore(keep_finished=n, keep_finished_total=n)
    stride = n // 10
    for i in range(n):
        alices = i % stride == 0 and i < 10 * stride
        context_id = SHARED if i >= n - context else f"ctx_{i}"
        record = store.add(TaskRecord(f"tsk_{i:08d}", context_id, "alice" if alices else None))
        store.change(record, state=WORKING)
        store.change(record, state=FAILED if alices and i // stride % 5 == 0 else COMPLETED)
    return store


def everyone(owner) -> bool:
    return True


def alice(owner) -> bool:
    return owner == "alice"


ASKS = {  # name: (sees, status, statusTimestampAfter in ms, contextId)
    "every task (an operator)": (everyone, None, None, None),
    "a credential's own": (alice, None, None, None),
    "status FAILED (an operator)": (everyone, FAILED, None, None),
    "a credential's own, FAILED": (alice, FAILED, None, None),
    "a credential's own, since 1970": (alice, None, 0, None),
    "one contextId (an operator)": (everyone, None, None, SHARED),
    "one contextId, COMPLETED": (everyone, COMPLETED, None, SHARED),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="ms per filtered ListTasks page")
    parser.add_argument("-n", "--tasks", type=int, default=50_000, help="tasks held")
    parser.add_argument("--context", type=int, default=10_000,
                        help="tasks that share one contextId (the newest)")
    parser.add_argument("--repeat", type=int, default=200, help="pages timed per filter")
    args = parser.parse_args(argv)
    store = fill(args.tasks, min(args.context, args.tasks))
    print(f"{len(store)} tasks held; one page of 50, best of 3 runs of {args.repeat}:")
    for name, (sees, state, cutoff, context_id) in ASKS.items():
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(args.repeat):
                page, _, total = store.page(sees, state, cutoff, context_id, 50, None,
                                            lambda record: record.id)
            best = min(best, (time.perf_counter() - start) / args.repeat)
        print(f"  {name:32s} {best * 1000:8.3f} ms  ({len(page)} shown of {total})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
