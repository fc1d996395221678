"""The runs that ended leaving their replica's runs (``RunsLeft``, mixed into
``redis.RedisTaskStore``).

A run is in its replica's runs (``runs:<replica>``, the hub's slot) from its task's
creation; once it ends (or never began: a message sent again, or refused) it is *left*,
and its replica's next beat takes it out of the runs (``flush_runs``). With
``redis.wait_replicas`` 0 an end written to a primary (and answered) that failed over
before its replica had it is gone, the task WORKING on the new primary; out of the runs
nothing would ever end it, so such a task is ended FAILED (``LOST_END``) first (with
``wait_replicas`` N ≥ 1 an end is acknowledged by the replicas: the runs leave in one
``ZREM``, nothing read):

- on one Redis (Sentinel's included) the beat's one script (``LEAVE``) takes out only
  the runs whose task it finds ended, or gone, on the primary it writes to, and hands
  back the others, which the next turn ends (``settle_runs``); the beat after takes them
  out. A run is never taken out of the runs on a primary that lacks its end;
- on a cluster (a task and the runs are in different slots) the turn reads the left
  runs' states first (``settle_runs``, one round trip per primary; a tenant whose
  primary is away is read again next turn, its runs listed meanwhile), and the beat
  takes out those read ended or gone (the hub's slot only, so a tenant's primary away
  keeps no beat from Redis). An end lost in a failover of the tenant's primary after
  that read is not seen: the run is then out of the runs.

Concurrency: ``_left``, ``_settled`` and ``_unended`` are lists changed by the GIL's
atomic operations (the runs' threads append, the replica's turn takes them all).
"""
from __future__ import annotations

import logging

from redis import ResponseError
from redis.exceptions import ClusterCrossSlotError

from murmur_wsgi.hub.store.base import StoreError
from murmur_wsgi.hub.store.redis_client import guarded as _guarded
from murmur_wsgi.hub.store.redis_clock import TERMINAL_FN
from murmur_wsgi.hub.store.redis_keys import member, runs_key, split_member, task_key
from murmur_wsgi.hub.task import FAILED, TERMINAL, artifacts_of

logger = logging.getLogger(__name__)

# What a task whose run's end was lost in a failover ends with (``_lost_ends``).
LOST_END = "interrupted: its end was lost with a Redis primary that failed over"

LEAVE_BATCH = 1000      # runs a ``LEAVE`` takes (Lua unpacks fewer than 8,000; about 2 ms)

# The runs ARGV out of the runs KEYS[1], each whose task KEYS[i + 1] is ended or gone;
# the members of the others (unended here: their end was lost), kept, returned.
LEAVE = TERMINAL_FN + """
local kept, gone = {}, {}
for i = 1, #ARGV do
  local s = redis.call('HGET', KEYS[i + 1], 'state')
  if s and not T[s] then kept[#kept + 1] = ARGV[i] else gone[#gone + 1] = ARGV[i] end
end
if #gone > 0 then redis.call('ZREM', KEYS[1], unpack(gone)) end
return kept
"""


def _taken(items: list) -> list:
    """Every item of ``items``, taken out of it; one another thread appends meanwhile stays
    (each step one atomic list operation)."""
    count = len(items)
    taken = items[:count]
    del items[:count]
    return taken


class RunsLeft:
    """``_ran``, ``settle_runs`` and ``flush_runs``: see the module."""

    def _ran(self, tenant: str, task_id: str) -> None:
        # NOTE: among the ended before it leaves the running: a call by id alone on another
        # thread (the run's own, reading the end another replica wrote) finds it throughout.
        names = self._names.get(task_id)
        if names is not None:
            self._ended(task_id, names)
            self._names.pop(task_id, None)
        self._left.append(member(tenant, task_id))

    def flush_runs(self) -> None:
        """Take the runs that ended (or never began) out of this replica's runs (the beat's:
        the hub's slot only): on one Redis those whose task is ended or gone there
        (``LEAVE``), the others kept for ``settle_runs``; on a cluster those ``settle_runs``
        looked at."""
        if self.conn.wait_replicas:
            self._settled.extend(_taken(self._left))    # each end acknowledged by the replicas
        elif self._runs_in_script:
            self._leave()
        if self._settled:
            left = _taken(self._settled)
            try:
                self._redis.zrem(runs_key(self.replica), *left)
            except BaseException:
                self._settled.extend(left)          # the next beat tries again
                raise

    def _leave(self) -> None:
        if not self._left:
            return
        left = _taken(self._left)
        runs, kept = runs_key(self.replica), []
        try:
            # NOTE: a batch at a time: Redis serves others between two (a busy replica's
            # beat may take ten thousand runs out).
            for at in range(0, len(left), LEAVE_BATCH):
                some = left[at:at + LEAVE_BATCH]
                kept += self._leaving(keys=[runs, *(task_key(*split_member(found))
                                                    for found in some)], args=some)
        except ResponseError as ex:
            self._left.extend(left)
            # NOTE: a Redis that keeps a script to one slot (a proxy in front of a cluster
            # node): from then on the runs are looked at as on a cluster.
            if not (isinstance(ex, ClusterCrossSlotError) or str(ex).startswith("CROSSSLOT")):
                raise
            self._runs_in_script = False
            return
        except BaseException:
            self._left.extend(left)                 # the next beat tries again
            raise
        self._unended.extend(kept)

    @_guarded
    def settle_runs(self) -> None:
        """The turn's look at the runs that ended: on one Redis, end FAILED those the last
        beat found unended (``flush_runs``); on a cluster, read the states of those left
        since the last turn, end FAILED the unended ones, and hand the others to the beat.
        One whose task cannot be read or ended now (its tenant's primary away) is looked at
        again next turn, and stays listed meanwhile. Nothing with ``wait_replicas`` N ≥ 1."""
        if self.conn.wait_replicas:
            return
        if self._runs_in_script:
            if self._unended:
                unended = _taken(self._unended)
                kept = self._end_lost(unended)
                self._unended.extend(kept)
                self._left.extend(found for found in unended if found not in kept)
            return
        if not self._left:
            return
        left = _taken(self._left)
        try:
            kept = self._lost_ends(left)
        except BaseException:
            self._left.extend(left)
            raise
        self._left.extend(kept)
        self._settled.extend(found for found in left if found not in kept)

    def _lost_ends(self, left: list) -> set:
        """End FAILED (``LOST_END``) each run of ``left`` whose task Redis holds, and not
        ended: its end, written and answered, was lost with a primary that failed over
        before its replica had it (``redis.wait_replicas`` 0), and out of the runs nothing
        would ever end it. One round trip (per primary) reads them; those whose state or
        end fails are returned."""
        pipe = self._redis.pipeline(transaction=False)
        for found in left:
            tenant, task_id = split_member(found)
            pipe.hget(task_key(tenant, task_id), "state")
        unended, kept = [], set()
        for found, state in zip(left, pipe.execute(raise_on_error=False)):
            if isinstance(state, Exception) and not isinstance(state, ResponseError):
                kept.add(found)         # its tenant's primary away (a cluster's node)
            elif isinstance(state, str) and state not in TERMINAL:
                unended.append(found)   # (gone, ended, or no record to end: a bad key)
        return kept | self._end_lost(unended)

    def _end_lost(self, unended: list) -> set:
        """End FAILED (``LOST_END``) each run of ``unended``, its published artifacts kept;
        those whose end fails are returned."""
        kept = set()
        for found in unended:
            tenant, task_id = split_member(found)
            try:
                artifacts = artifacts_of(self.logged(task_id, tenant)) or None
                written = self.end(task_id, FAILED, LOST_END, artifacts, [], tenant=tenant)
            except StoreError:
                kept.add(found)
                continue
            if written is not None:     # (None: ended meanwhile, a cancel say: kept so)
                logger.warning("redis store: task %s ended FAILED: its end was lost with a "
                               "primary that failed over", task_id)
        return kept
