"""The session's tasks in order of last change: every task, and each (owner, state)'s.

Every change gives a task the next ``seq`` (its place in "most recently changed
first"). The whole order is two parallel ascending lists, seqs and task ids; each
(owner, state) adds a list of its tasks' seqs alone, which the whole order maps back
to a task (a bisection), so a filtered ListTasks page reads the tasks it shows, not
every task held. An entry goes stale when its task changes again (a new seq) or is
dropped; readers skip stale entries, and a list is rebuilt without them once they
outnumber the live ones. A task leaving an (owner, state) takes its entry out of a
short list, or of the end of any, so the lists tasks pass through are not rebuilt. A
state change always restamps the task, so a live entry in the list of (owner, state)
is a task of that owner in that state.

Concurrency:
    None of its own: the store calls every method under its lock.
"""
from __future__ import annotations

import bisect
import heapq


class TaskOrder:
    """Where each held task stands, most recently changed last in every list."""

    # Lists shorter than this are never rebuilt to shed stale entries.
    COMPACT_AT = 64

    def __init__(self, tasks: dict):
        self._tasks = tasks                            # the store's: task id -> record
        self._seq = 0
        self._seqs: list[int] = []                     # ascending, stale entries too
        self._ids: list[str] = []                      # parallel to _seqs
        # (owner, state) -> how many tasks (never 0): ListTasks' totalSize without a walk
        self._counts: dict[tuple, int] = {}
        # (owner, state) -> its tasks' seqs, ascending, stale ones too; a key in counts
        # MEMORY: seqs alone (the int the record holds): 8 bytes a task, not 16 with its id.
        self._keyed: dict[tuple, list[int]] = {}

    # --- writes ----------------------------------------------------------

    def add(self, record) -> None:
        """Place a new task first."""
        key = (record.owner, record.state)
        self._counts[key] = self._counts.get(key, 0) + 1
        self._place(record, key)

    def change(self, record, before: str) -> None:
        """Move a changed task first; ``before``: its state before the change.

        NOTE: a held task: an ended one never changes again, so none dropped does.
        """
        key = (record.owner, record.state)
        if record.state != before:
            old = record.seq
            self._counts[key] = self._counts.get(key, 0) + 1
            self._place(record, key)
            self._less((record.owner, before), old)
        else:
            self._place(record, key)

    def drop(self, record) -> None:
        """Forget a task the store has just removed."""
        self._less((record.owner, record.state), record.seq)
        if len(self._seqs) > self.COMPACT_AT and len(self._seqs) > 2 * len(self._tasks):
            self._shed_all()

    def _place(self, record, key: tuple) -> None:
        old = record.seq
        self._seq += 1
        seq = record.seq = self._seq
        ids = self._ids
        if ids and ids[-1] == record.id:
            # PERF: it was the last changed already (a task run at once changes three times
            # in a row): its entry moves up in place, still last, and leaves nothing stale.
            self._seqs[-1] = seq
        else:
            self._seqs.append(seq)
            ids.append(record.id)
            if len(ids) > self.COMPACT_AT and len(ids) > 2 * len(self._tasks):
                self._shed_all()
        keyed = self._keyed.get(key)
        if keyed is None:
            self._keyed[key] = [seq]
        elif keyed[-1] == old:
            keyed[-1] = seq                            # PERF: as above, in its own list
        else:
            keyed.append(seq)
            if len(keyed) > self.COMPACT_AT and len(keyed) > 2 * self._counts[key]:
                self._shed(key, keyed)

    def _less(self, key: tuple, seq: int) -> None:
        """One task fewer in ``key``, whose entry there was ``seq``: its list goes with
        its last task.

        PERF: the entry leaves a short list (or the end of any), C speed, rather than
        staying stale: the lists tasks pass through (SUBMITTED, WORKING) are never
        rebuilt."""
        count = self._counts[key] - 1
        if not count:
            del self._counts[key]
            del self._keyed[key]
            return
        self._counts[key] = count
        keyed = self._keyed[key]
        if keyed[-1] == seq:
            keyed.pop()
        elif len(keyed) <= self.COMPACT_AT:
            keyed.remove(seq)
        elif len(keyed) > 2 * count:
            self._shed(key, keyed)

    def _shed(self, key: tuple, keyed: list) -> None:
        """Rebuild ``keyed`` without its stale entries (they are the most)."""
        self._keyed[key] = [seq for seq in keyed if self._record(seq) is not None]

    def _shed_all(self) -> None:
        """Rebuild the whole order without its stale entries (they are the most)."""
        live = [(seq, tid) for seq, tid in zip(self._seqs, self._ids)
                if (rec := self._tasks.get(tid)) is not None and rec.seq == seq]
        self._seqs = [seq for seq, _ in live]
        self._ids = [tid for _, tid in live]

    # --- reads -----------------------------------------------------------

    def _record(self, seq: int):
        """The task whose place is ``seq``, or None for a stale one."""
        seqs = self._seqs
        i = bisect.bisect_left(seqs, seq)
        if i < len(seqs) and seqs[i] == seq:
            rec = self._tasks.get(self._ids[i])
            if rec is not None and rec.seq == seq:
                return rec
        return None

    def keys(self, sees, state: str | None) -> list[tuple] | None:
        """The (owner, state) keys a reader's filters take; None for every task held."""
        keys = [key for key in self._counts if sees(key[0]) and (state is None or key[1] == state)]
        return None if len(keys) == len(self._counts) else keys

    def total(self, keys: list[tuple] | None) -> int:
        """How many tasks ``keys`` (from ``keys()``) hold."""
        return len(self._tasks) if keys is None else sum(self._counts[key] for key in keys)

    def walk(self, keys: list[tuple] | None, before: int | None):
        """The tasks of ``keys`` (None: every task), most recently changed first, each
        once; only those placed before ``before`` (a seq) when it is given.

        PERF: a few bisections to start, then one per task of the keys read: the
        walk costs what its reader takes, whatever else the store holds.
        """
        if keys is None:
            seqs, ids, tasks = self._seqs, self._ids, self._tasks
            end = len(seqs) if before is None else bisect.bisect_left(seqs, before)
            for i in range(end - 1, -1, -1):
                rec = tasks.get(ids[i])
                if rec is not None and rec.seq == seqs[i]:
                    yield rec
            return
        runs = [_descending(self._keyed[key], before) for key in keys]
        if not runs:
            return
        for seq in runs[0] if len(runs) == 1 else heapq.merge(*runs, reverse=True):
            rec = self._record(seq)
            if rec is not None:
                yield rec


def _descending(seqs: list[int], before: int | None):
    """``seqs`` (ascending) from the last below ``before`` down, copying nothing."""
    end = len(seqs) if before is None else bisect.bisect_left(seqs, before)
    return map(seqs.__getitem__, range(end - 1, -1, -1))
