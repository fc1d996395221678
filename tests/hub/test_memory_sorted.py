"""The memory store's sorted indexes (``memory_sorted``): a tenant at its cap forgets its
oldest task at every end, and that moves none of the keys of the lists it leaves.

Counted, not timed: the places of each list written by an end (a key moved by one place
writes one). ``del keys[0]`` of a list of n keys wrote n - 1 of them; a key leaving near the
front now writes a dead place, and the dead prefix is cut once it passes half the list.
Against a model too: for any puts and drops, the keys from ``first`` on are the model's,
the dead places before them None and fewer than the keys.
"""
from __future__ import annotations

import bisect
import operator
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from murmur_wsgi.hub.store.memory import MemoryTaskStore
from murmur_wsgi.hub.store.memory_sorted import SHORT, SortedKeys, first
from murmur_wsgi.hub.store.retention import Retention
from murmur_wsgi.hub.task import COMPLETED, REJECTED, HubTask

CAP = 2_000
CONTEXTS = 4


def _refused(store, i: int) -> HubTask:
    task = HubTask(f"t-{i}", f"c{i % CONTEXTS}", "acme", "echo", f"m{i}",
                   {"messageId": f"m{i}", "role": "ROLE_USER", "parts": [{"text": "hi"}]})
    task.set_state(REJECTED, "refused")
    store.create(task, None, bind=False)       # refused at its creation: finished at once
    return task


def _writes(before: list, after) -> int:
    """The places of a list written between a copy of it and it (its growth and shrinking
    included)."""
    after = [] if after is None else list(after)
    return sum(map(operator.ne, before, after)) + abs(len(before) - len(after))


def test_a_tenant_at_its_cap_forgets_its_oldest_without_moving_the_other_keys():
    store = MemoryTaskStore(retention=Retention(3600.0, CAP))
    tasks = [_refused(store, i) for i in range(CAP)]
    indexes = store._indexes
    lists = [(indexes._lists, ("acme", "echo")), (indexes._lists, ("acme", "echo", "st", REJECTED)),
             (indexes._lists, ("acme", "echo", "ctx", "c1")), (indexes._updated, ("acme", "echo"))]
    written = 0
    for i in range(CAP, 2 * CAP):                # every end forgets the oldest
        before = [list(keys.get(name)) for keys, name in lists]
        tasks.append(_refused(store, i))
        written += sum(_writes(old, keys.get(name)) for old, (keys, name) in zip(before, lists))
    # Before: 12,250,000 (each end moved every key of the agent's, its state's and its
    # times' lists, and of its context's one end in four). Now 13,000: a dead place and
    # the new key, and the dead prefix cut once it passes half.
    assert written <= 4 * len(lists) * CAP, f"{written / CAP:.1f} places written an end"
    kept = tasks[CAP:]
    page = store.list("acme", "echo", page_size=CAP)
    assert [task.id for task in page.tasks] == [task.id for task in reversed(kept)]
    assert page.total == CAP and not page.next_token
    page = store.list("acme", "echo", context_id="c1", state=REJECTED, page_size=10)
    assert [task.id for task in page.tasks] == [task.id for task in reversed(kept)
                                                if task.context_id == "c1"][:10]
    assert page.total == CAP // CONTEXTS
    cutoff = kept[CAP // 2].status_ms
    page = store.list("acme", "echo", state=REJECTED, after_ms=cutoff, page_size=CAP)
    assert [task.id for task in page.tasks] == [task.id for task in reversed(kept)
                                                if task.status_ms > cutoff]


operations = st.lists(st.tuples(
    st.sampled_from(["oldest", "newest", "drop", "put"]),
    st.integers(1, 2 * SHORT),                    # how many times
    st.floats(0, 1, exclude_max=True)), max_size=30)   # where (drop, put)


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(size=st.integers(0, 4 * SHORT), steps=operations)
def test_sorted_keys_hold_the_models_keys_after_their_dead_places(size, steps):
    keys, model = SortedKeys(), []
    for key in range(0, 4 * size, 4):            # room between them for the puts
        keys.put("n", key)
        model.append(key)
    for kind, times, where in steps:
        for _ in range(times):
            if kind == "newest":
                key = (model[-1] if model else 0) + 4
            elif kind == "put":
                key = int(where * (model[-1] + 8 if model else 8)) - 4
            elif model:
                key = model[0 if kind == "oldest" else int(where * len(model))]
            else:
                break
            if kind in ("newest", "put"):
                if key not in model:
                    keys.put("n", key)
                    bisect.insort(model, key)
            else:
                model.remove(key)
                keys.drop("n", key)
                keys.drop("n", key)                # a key it no longer holds: nothing
            held = keys.get("n")
            if not model:
                assert held is None
                continue
            lo = first(held)
            assert list(held[lo:]) == model, (kind, key)
            assert all(dead is None for dead in held[:lo]) and 2 * lo <= len(held), (kind, lo)
    assert keys.count() == len(model)


def test_a_tasks_start_and_end_write_its_indexes_in_few_calls():
    """A blocking SendMessage's task changes state twice (started, ended), each a removal
    and a put in three lists: the newest key, a short list, a context's one task. Those
    fast paths read no head and check no dead prefix: the calls each change makes
    (``sys.setprofile``, Python and C alike) are about as few as with plain lists."""
    store = MemoryTaskStore()
    indexes, running, counted = store._indexes, [], []
    moved = indexes.moved

    def count_moved(*args):
        calls = 0

        def count(frame, event, arg):
            nonlocal calls
            calls += event in ("call", "c_call")

        sys.setprofile(count)
        try:
            moved(*args)
        finally:
            sys.setprofile(None)
        counted.append(calls - 1)               # not setprofile(None)

    indexes.moved = count_moved
    for i in range(400):                        # 16 in flight, as concurrent SendMessages
        task = HubTask(f"t-{i}", f"c{i}", "acme", "echo", f"m{i}",
                       {"messageId": f"m{i}", "role": "ROLE_USER", "parts": [{"text": "hi"}]})
        store.create(task, "{}")
        running.append(task)
        if len(running) > 16:
            task = running.pop(0)
            store.start(task.id)
            store.end(task.id, COMPLETED, None, None, [])
    # 16.5 a change when the lists were plain lists, 24 with every removal reading its
    # head and checking its dead prefix, 17.5 with those fast paths.
    assert sum(counted) / len(counted) <= 19, sum(counted) / len(counted)
