"""The store's ListTasks page: the work a filtered page does, and the page against a model.

A page that filters by status, or that a credential reads (its own tasks only), reads
the tasks it shows, not every task held: the calls it makes (counted with
``sys.setprofile``, Python and C alike) are the same at 20 000 tasks as at 2 000. And
over any sequence of adds, changes, finishes and evictions, every page (any reader,
status, statusTimestampAfter, contextId, position and size) is the one a plain sort
of the held tasks gives: the same tasks, next position and total.
"""
from __future__ import annotations

import sys
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_wsgi.door.tasks import store as store_module
from murmur_wsgi.door.tasks.order import TaskOrder
from murmur_wsgi.door.tasks.record import (CANCELED, COMPLETED, FAILED, INPUT_REQUIRED,
                                           SUBMITTED, TERMINAL, WORKING, TaskRecord)
from murmur_wsgi.door.tasks.store import TaskStore

def everyone(owner) -> bool:
    return True


LISTED = [SUBMITTED, WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELED]


def _calls(work):
    """``work()`` and the calls it made (functions and builtins)."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        result = work()
    finally:
        sys.setprofile(None)
    return result, calls


def _filled(n: int, now: list) -> TaskStore:
    """``n`` finished tasks: 30 of them alice's (every fifth FAILED), the rest the session's."""
    store = TaskStore(keep_finished=n, keep_finished_total=n, keep_finished_secs=100,
                      clock=lambda: now[0])
    stride = n // 30
    for i in range(n):
        alices = i % stride == 0 and i < 30 * stride
        record = TaskRecord(f"tsk_{i:06d}", f"ctx_{i}", "alice" if alices else None)
        record.state = FAILED if alices and i // stride % 5 == 0 else COMPLETED
        store.add(record)
    return store


def _pages(store: TaskStore) -> dict:
    """Each filtered page alice or an operator asks, and the calls it made."""
    alice = (lambda owner: owner == "alice")
    middle = 20 * (len(store) // 30)            # alice's 21st task: her page 2 starts below it
    asks = {"alice": (alice, None, None, None), "failed": (everyone, FAILED, None, None),
            "alice failed": (alice, FAILED, None, None),
            "alice since": (alice, None, 0, None),
            "alice page 2": (alice, None, None, store.get(f"tsk_{middle:06d}").seq)}
    return {name: _calls(lambda: store.page(sees, state, cutoff, None, 10, after,
                                            lambda r: r.id))
            for name, (sees, state, cutoff, after) in asks.items()}


def test_a_filtered_page_reads_the_tasks_it_shows_not_every_task():
    small, large = _pages(_filled(2_000, [0.0])), _pages(_filled(20_000, [0.0]))
    for name, ((page, more, total), calls) in large.items():
        (small_page, small_more, small_total), small_calls = small[name]
        assert (len(page), more is None, total) == (len(small_page), small_more is None,
                                                   small_total), name
        assert calls <= small_calls + 10, (name, calls, small_calls)
        assert calls < 1_000, (name, calls)
    assert large["alice"][0][2] == 30 and len(large["alice"][0][0]) == 10
    assert large["alice failed"][0][2] == 6
    assert large["failed"][0][2] == 6


def test_a_page_after_most_tasks_aged_out_reads_only_those_left():
    now = [0.0]
    store = _filled(20_000, now)
    late = [TaskRecord(f"tsk_late{i}", "ctx_late", "alice") for i in range(3)]
    now[0] = 90.0
    for record in late:
        record.state = COMPLETED
        store.add(record)
    now[0] = 150.0                              # every task but the late ones has aged out
    for sees in (lambda owner: owner == "alice", everyone):
        page, more, total = store.page(sees, None, None, None, 10, None, lambda r: r.id)
        assert (page, more, total) == ([r.id for r in reversed(late)], None, 3)
        again, calls = _calls(
            lambda: store.page(sees, None, None, None, 10, None, lambda r: r.id))
        assert again == (page, more, total)
        assert calls < 300, calls


# --- the page against a model ----------------------------------------------

OWNERS = [None, "alice", "bob"]
READERS = [everyone, lambda owner: owner is None, lambda owner: owner == "alice",
           lambda owner: owner == "bob"]

adds = st.tuples(st.just("add"), st.integers(0, 2), st.integers(0, 3),
                 st.sampled_from([SUBMITTED, SUBMITTED, WORKING, COMPLETED, FAILED]))
changes = st.tuples(st.just("change"), st.integers(0, 10_000), st.sampled_from(LISTED[1:]))
# cutoff: half-milliseconds before the last stamp; after: a position so far back
lists = st.tuples(st.just("list"), st.integers(0, len(READERS) - 1),
                  st.none() | st.sampled_from(LISTED), st.none() | st.integers(-1, 30),
                  st.none() | st.integers(0, 3), st.integers(1, 4),
                  st.none() | st.integers(0, 40))
steps = st.lists(st.one_of(adds, adds, adds, changes, changes, changes, lists, lists,
                           st.tuples(st.just("tick"), st.integers(0, 2)),
                           st.tuples(st.just("age"), st.integers(1, 6))),
                 min_size=30, max_size=150)


@pytest.mark.parametrize("compact_at", [2, TaskOrder.COMPACT_AT])
@settings(max_examples=120, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps)
def test_every_page_is_the_models(compact_at, steps):
    """At 2, every list sheds its stale entries and a task leaving a list takes its entry
    out only when it is the last; at the default, the lists here stay short: a task
    leaving one takes its entry out."""
    ms, now = [1_000], [0.0]
    with mock.patch.object(store_module, "now_ms", lambda: ms[0]), \
            mock.patch.object(TaskOrder, "COMPACT_AT", compact_at):
        store = TaskStore(keep_finished=6, keep_finished_total=12, keep_finished_secs=10,
                          clock=lambda: now[0])
        model: dict[str, list] = {}             # id -> [seq, owner, state, context, ms]
        seq = 0
        for step in steps:
            if step[0] == "add":
                _, owner, context, state = step
                record = TaskRecord(f"tsk_{len(model)}", f"ctx_{context}", OWNERS[owner])
                record.state = state
                store.add(record)
                seq += 1
                model[record.id] = [seq, record.owner, state, record.context_id, ms[0]]
            elif step[0] == "change":
                # an ended task never changes again
                live = [tid for tid in model if (record := store.get(tid)) is not None
                        and record.state not in TERMINAL]
                if not live:
                    continue
                record, state = store.get(live[step[1] % len(live)]), step[2]
                store.change(record, state=state)
                seq += 1
                model[record.id][0], model[record.id][2], model[record.id][4] = seq, state, ms[0]
            elif step[0] == "tick":
                ms[0] += step[1]
            elif step[0] == "age":
                now[0] += step[1]
            else:
                _, reader, state, cutoff, context, size, after = step
                cutoff_ms = None if cutoff is None else ms[0] - cutoff / 2
                after = None if after is None else seq + 1 - after
                context_id = None if context is None else f"ctx_{context}"
                page, more, total = store.page(READERS[reader], state, cutoff_ms,
                                               context_id, size, after, lambda r: r.id)
                want = _model_page(store, model, READERS[reader], state, cutoff_ms,
                                   context_id, size, after)
                assert (page, more, total) == want, (step, model)
        for tid, (want_seq, *_) in model.items():
            record = store.get(tid)
            assert record is None or record.seq == want_seq


def _model_page(store, model, sees, state, cutoff_ms, context_id, size, after):
    """The page as a plain sort of the held tasks gives it."""
    hits = sorted(((seq, tid) for tid, (seq, owner, task_state, context, ms) in model.items()
                   if store.get(tid) is not None and sees(owner)
                   and (state is None or task_state == state)
                   and (cutoff_ms is None or ms >= cutoff_ms)
                   and (context_id is None or context == context_id)), reverse=True)
    total = len(hits)
    if after is not None:
        hits = [hit for hit in hits if hit[0] < after]
    shown = hits[:size]
    return [tid for _, tid in shown], (shown[-1][0] if len(hits) > size else None), total


def test_a_queued_tasks_life_orders_it_in_few_calls():
    """``task_acceptance: queue``: 16 tasks wait SUBMITTED, each leaves that list from its
    front as it starts, then WORKING as it ends. The entry leaves a short list with its
    task, so the lists tasks pass through are never rebuilt, and whether a list is due a
    rebuild is checked in place: the calls TaskOrder makes for a task's add, start and end
    (``sys.setprofile``, Python and C alike)."""
    store = TaskStore()
    order, queued, counted = store._order, [], []

    def counting(method):
        def counted_call(*args):
            counted.append(_calls(lambda: method(*args))[1])
        return counted_call

    order.add, order.change = counting(order.add), counting(order.change)
    for i in range(1_000):
        queued.append(store.add(TaskRecord(f"tsk_{i:06d}", f"ctx_{i}")))
        if len(queued) > 16:
            record = queued.pop(0)
            store.change(record, state=WORKING)
            store.change(record, state=COMPLETED)
    per_task = sum(counted) / (len(counted) / 3)
    # 46 a task when each entry stayed stale and a list was rebuilt once it held 64; 37
    assert per_task <= 40, per_task
