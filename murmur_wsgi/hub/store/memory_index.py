"""ListTasks on the memory store: sorted indexes, so a page reads only itself.

Per tenant and agent, a task is in four indexes keyed by its creation number
``seq`` (every task; its context's; its state's; its context's in its state),
and in one keyed by ``(status time, seq)``. A page with no filter, a
``contextId``, a ``status`` or both is a bisect and a slice of one index:
O(log n + page). ``statusTimestampAfter`` takes the tasks changed since from
the time index (usually few) and filters those, outside the store's lock.

Concurrency: every method but ``filtered_page`` is called under the store's lock; that
one reads the agent's tasks by seq outside it, one ``get`` at a time (each atomic).
"""
from __future__ import annotations

import bisect
from operator import itemgetter

from murmur_wsgi.hub.store.base import Page
from murmur_wsgi.hub.store.memory_sorted import SortedKeys, first
from murmur_wsgi.hub.store.pages import encode_token
from murmur_wsgi.hub.task import as_task, filed_under, status_ms

_SEQ = itemgetter(1)

_AFTER_ALL = float("inf")
_SPARSE = 16               # the tasks changed since read alone below an index this many times


class TaskIndexes:
    """Every index of one memory store (guarded by its lock): sorted ``seq``s per index
    (``memory_sorted``: the oldest go cheaply, as a tenant at its cap forgets them), the
    tasks by ``seq`` per tenant and agent, and ``(status ms, seq)`` per agent."""

    def __init__(self):
        self._tasks: dict[tuple, dict] = {}       # (tenant, agent) -> {seq: task or record}
        self._lists = SortedKeys()                # index name -> seqs
        self._updated = SortedKeys()              # (tenant, agent) -> (ms, seq)s

    def add(self, task) -> None:
        owner = (t, a) = (task.tenant, task.agent)
        c, state, seq = task.context_id, task.state, task.seq
        self._tasks.setdefault(owner, {})[seq] = task
        for name in (owner, (t, a, "ctx", c), (t, a, "st", state), (t, a, "cst", c, state)):
            self._lists.put(name, seq)
        self._updated.put(owner, (task.status_ms, seq))

    def kept(self, task, record: tuple) -> None:
        """The finished ``task`` is kept as ``record`` (``HubTask.record``) from now on."""
        self._tasks[(task.tenant, task.agent)][task.seq] = record

    def moved(self, task, old_state: str, old_ms: int) -> None:
        """``task`` changed from ``old_state`` at ``old_ms`` to its state now."""
        t, a, c, seq, state = task.tenant, task.agent, task.context_id, task.seq, task.state
        if old_state != state:
            lists = self._lists
            lists.drop((t, a, "st", old_state), seq)
            lists.drop((t, a, "cst", c, old_state), seq)
            lists.put((t, a, "st", state), seq)
            lists.put((t, a, "cst", c, state), seq)
        self._updated.drop((t, a), (old_ms, seq))
        self._updated.put((t, a), (task.status_ms, seq))

    def remove(self, task) -> None:
        owner = (t, a) = (task.tenant, task.agent)
        c, state, seq = task.context_id, task.state, task.seq
        for name in (owner, (t, a, "ctx", c), (t, a, "st", state), (t, a, "cst", c, state)):
            self._lists.drop(name, seq)
        self._updated.drop(owner, (task.status_ms, seq))
        by_seq = self._tasks.get(owner)
        if by_seq is not None and by_seq.pop(seq, None) is not None and not by_seq:
            del self._tasks[owner]

    def _newest(self, owner: tuple, seqs, before, count: int) -> list:
        """Up to ``count`` tasks of ``seqs`` below ``before`` (None: all), newest first."""
        lo = first(seqs)
        hi = len(seqs) if before is None else bisect.bisect_left(seqs, before, lo)
        by_seq = self._tasks[owner]
        return [as_task(by_seq[seq]) for seq in reversed(seqs[max(lo, hi - count):hi])]

    def context_tasks(self, tenant: str, agent: str, context_id: str, limit: int) -> list:
        seqs = self._lists.get((tenant, agent, "ctx", context_id))
        return [] if seqs is None else self._newest((tenant, agent), seqs, None, limit)[::-1]

    def page(self, tenant, agent, context_id, state, after_ms, page_size, before):
        """A Page read from one index, or (for ``after_ms``) the tasks changed since and the
        other filters' index, copied, to ``filtered_page`` outside the lock."""
        owner = (tenant, agent)
        if context_id is None:
            name = owner if state is None else (tenant, agent, "st", state)
        else:
            name = (tenant, agent, "ctx", context_id) if state is None else \
                (tenant, agent, "cst", context_id, state)
        seqs = self._lists.get(name)
        if after_ms is not None:
            updated = self._updated.get(owner)
            if updated is None:
                return Page([], "", 0)
            lo = first(updated)
            after = bisect.bisect_right(updated, (after_ms, _AFTER_ALL), lo)
            if after > lo:              # else every task changed since: the index alone
                by_seq = self._tasks[owner]
                if name == owner:
                    return updated[after:], by_seq, None, None, after_ms
                if seqs is None:
                    return Page([], "", 0)
                # PERF: slices, C speed, under the lock; the matching outside it. Of the
                # tasks changed since and the other filters' index, the smaller is read:
                # the tasks changed since when the index holds many times more (none, the
                # usual poll: O(log n)), each asked its context and state; the index when
                # it holds fewer (a small context among many), each asked its status time;
                # else both, matched as sets. NOTE: copying the index first cost O(its
                # tasks) even when nothing changed since (2.6 ms at a status of 100,000).
                changed = len(updated) - after
                held = len(seqs) - first(seqs)
                if changed * _SPARSE <= held:
                    return updated[after:], by_seq, None, (context_id, state), after_ms
                among = seqs[first(seqs):]
                if held < changed:
                    return None, by_seq, among, None, after_ms
                return updated[after:], by_seq, among, None, after_ms
        if seqs is None:
            return Page([], "", 0)
        tasks = self._newest(owner, seqs, before, page_size + 1)
        more = len(tasks) > page_size
        return Page(tasks[:page_size], encode_token(tasks[page_size - 1].seq) if more else "",
                    len(seqs) - first(seqs))


def filtered_page(changed: tuple, page_size: int, before) -> Page:
    """A page of ``changed``, as the store held it: the ``(status ms, seq)`` of the tasks
    changed after a time (None: the other filters' index holds fewer), the agent's tasks by
    seq, the seqs the other filters' index holds (None: not read), the other filters'
    ``(context id, state)`` (either None: any) when each task changed since is asked them
    instead (None: not asked), and that time. Outside the store's lock: a task that goes
    meanwhile is left out of the page, and one asked its context and state answers as it is.

    PERF: the seqs matched as sets and sorted as ints (C speed: about 7 ms for 100,000
    tasks changed since), or the fewer seqs of either side each asked its task's status
    time, or its context and state; only the page's tasks are read."""
    updated, by_seq, among, filed, after_ms = changed
    if updated is None:                 # ascending already, as the index held them
        ordered = [seq for seq in among
                   if (found := by_seq.get(seq)) is not None and status_ms(found) > after_ms]
    elif filed is not None:
        ordered = sorted(seq for _, seq in updated
                         if (found := by_seq.get(seq)) is not None and _filed(found, *filed))
    else:
        seqs = set(map(_SEQ, updated))
        if among is not None:
            seqs.intersection_update(among)
        ordered = sorted(seqs)
    hi = len(ordered) if before is None else bisect.bisect_left(ordered, before)
    page = []
    for seq in reversed(ordered[:hi]):
        found = by_seq.get(seq)
        if found is not None:
            if len(page) == page_size:
                return Page(page, encode_token(page[-1].seq), len(ordered))
            page.append(as_task(found))
    return Page(page, "", len(ordered))


def _filed(entry, context_id, state) -> bool:
    """Whether ``entry`` is in ``context_id`` and ``state`` (None: any)."""
    its_context, its_state = filed_under(entry)
    return (context_id is None or its_context == context_id) and \
        (state is None or its_state == state)
