"""ListTasks on the memory store with ``statusTimestampAfter`` and another filter: the
smaller side is read. A context of one task among 20,000 changed since is its one task
asked its status time, not the 20,000 others matched as a set with it.

Measured, not timed: the memory a listing allocates (tracemalloc's peak), which the set of
every changed task's seq made about a megabyte of, and its answer, against the set's.
"""
from __future__ import annotations

import tracemalloc

from murmur_wsgi.hub.store.memory import MemoryTaskStore
from murmur_wsgi.hub.task import COMPLETED, REJECTED, HubTask

TASKS = 20_000
SMALL = 64 * 1024              # bytes a listing of a context of one may allocate at most


def _task(i: int, context: str, state: str) -> HubTask:
    task = HubTask(f"t-{i}", context, "acme", "echo", f"m{i}",
                   {"messageId": f"m{i}", "role": "ROLE_USER", "parts": [{"text": "hi"}]})
    task.set_state(state, None)
    return task


def _listed(store, **filters):
    tracemalloc.start()
    try:
        page = store.list("acme", "echo", **filters)
        return page, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_small_filter_among_many_tasks_changed_since_reads_its_own():
    store = MemoryTaskStore()
    oldest = _task(0, "c0", REJECTED)
    oldest.status_ms -= 10_000                  # the one task not changed since ``after``
    store.create(oldest, None, bind=False)
    for i in range(1, TASKS):
        store.create(_task(i, f"c{i % 4}", REJECTED), None, bind=False)
    tiny = _task(TASKS, "tiny", COMPLETED)
    store.create(tiny, None, bind=False)
    after = oldest.status_ms
    for filters, ids in (({"context_id": "tiny"}, [tiny.id]),
                         ({"state": COMPLETED}, [tiny.id]),
                         ({"context_id": "nowhere"}, [])):
        page, peak = _listed(store, after_ms=after, **filters)
        assert [task.id for task in page.tasks] == ids, filters
        assert page.total == len(ids), filters
        assert peak < SMALL, (filters, peak)
    # The other side, for comparison: every task changed since, in pages of 50.
    page, _ = _listed(store, after_ms=after, context_id="c1")
    assert len(page.tasks) == 50 and page.total == TASKS // 4
