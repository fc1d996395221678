"""ListTasks on the memory store: sorted indexes, so a page reads only itself.

Per tenant and agent, a task is in four indexes keyed by its creation number
``seq`` (every task; its context's; its state's; its context's in its state),
and in one keyed by ``(status time, seq)``. A page with no filter, a
``contextId``, a ``status`` or both is a bisect and a slice of one index:
O(log n + page). ``statusTimestampAfter`` takes the tasks changed since from
the time index (usually few) and filters those, outside the store's lock.

Concurrency: every method but ``filtered_page`` is called under the store's lock.
"""
from __future__ import annotations

import bisect

from murmur_wsgi.hub.store.base import Page
from murmur_wsgi.hub.store.pages import encode_token

_AFTER_ALL = float("inf")


class SortedIndex:
    """Values by sortable keys; ``keys`` ascending."""

    __slots__ = ("keys", "values")

    def __init__(self):
        self.keys: list = []
        self.values: dict = {}

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key, value) -> None:
        if not self.keys or key > self.keys[-1]:
            self.keys.append(key)                 # the usual case: a new task, the newest
        else:
            bisect.insort(self.keys, key)
        self.values[key] = value

    def remove(self, key) -> None:
        if self.values.pop(key, None) is not None:
            del self.keys[bisect.bisect_left(self.keys, key)]

    def newest(self, before, count: int) -> list:
        """Up to ``count`` values whose keys are below ``before`` (None: all), highest first."""
        hi = len(self.keys) if before is None else bisect.bisect_left(self.keys, before)
        return [self.values[key] for key in reversed(self.keys[max(0, hi - count):hi])]

    def above(self, key) -> list:
        return [self.values[k] for k in self.keys[bisect.bisect_right(self.keys, key):]]


class TaskIndexes:
    """Every index of one memory store (guarded by its lock)."""

    def __init__(self):
        self._sets: dict[tuple, SortedIndex] = {}
        self._updated: dict[tuple, SortedIndex] = {}       # (tenant, agent) -> by (ms, seq)

    @staticmethod
    def _names(task, state: str) -> tuple:
        t, a, c = task.tenant, task.agent, task.context_id
        return ((t, a), (t, a, "ctx", c), (t, a, "st", state), (t, a, "cst", c, state))

    def _put(self, name: tuple, key, task) -> None:
        found = self._sets.get(name)
        if found is None:
            found = self._sets[name] = SortedIndex()
        found.add(key, task)

    def _drop(self, name: tuple, key) -> None:
        found = self._sets.get(name)
        if found is not None:
            found.remove(key)
            if not found:
                del self._sets[name]

    def add(self, task) -> None:
        for name in self._names(task, task.state):
            self._put(name, task.seq, task)
        updated = self._updated.setdefault((task.tenant, task.agent), SortedIndex())
        updated.add((task.status_ms, task.seq), task)

    def moved(self, task, old_state: str, old_ms: int) -> None:
        """``task`` changed from ``old_state`` at ``old_ms`` to its state now."""
        for name in self._names(task, old_state)[2:]:
            self._drop(name, task.seq)
        for name in self._names(task, task.state)[2:]:
            self._put(name, task.seq, task)
        updated = self._updated[(task.tenant, task.agent)]
        updated.remove((old_ms, task.seq))
        updated.add((task.status_ms, task.seq), task)

    def remove(self, task) -> None:
        for name in self._names(task, task.state):
            self._drop(name, task.seq)
        updated = self._updated.get((task.tenant, task.agent))
        if updated is not None:
            updated.remove((task.status_ms, task.seq))
            if not updated:
                del self._updated[(task.tenant, task.agent)]

    def context_tasks(self, tenant: str, agent: str, context_id: str, limit: int) -> list:
        found = self._sets.get((tenant, agent, "ctx", context_id))
        return [] if found is None else found.newest(None, limit)[::-1]

    def page(self, tenant, agent, context_id, state, after_ms, page_size, before):
        """A Page read from one index, or (for ``after_ms``) the tasks changed since, to
        ``filtered_page`` outside the lock."""
        if after_ms is not None:
            updated = self._updated.get((tenant, agent))
            changed = [] if updated is None else updated.above((after_ms, _AFTER_ALL))
            if updated is None or len(changed) < len(updated):
                return changed
        if context_id is None:
            name = (tenant, agent) if state is None else (tenant, agent, "st", state)
        else:
            name = (tenant, agent, "ctx", context_id) if state is None else \
                (tenant, agent, "cst", context_id, state)
        found = self._sets.get(name)
        if found is None:
            return Page([], "", 0)
        tasks = found.newest(before, page_size + 1)
        more = len(tasks) > page_size
        return Page(tasks[:page_size], encode_token(tasks[page_size - 1].seq) if more else "",
                    len(found))


def filtered_page(changed: list, context_id, state, page_size: int, before) -> Page:
    """A page of ``changed`` (tasks changed after a time) matching the other filters."""
    matches = sorted((task for task in changed
                      if (context_id is None or task.context_id == context_id)
                      and (state is None or task.state == state)),
                     key=lambda task: task.seq, reverse=True)
    below = [task for task in matches if before is None or task.seq < before]
    more = len(below) > page_size
    page = below[:page_size]
    return Page(page, encode_token(page[-1].seq) if more else "", len(matches))
