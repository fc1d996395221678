"""The runs that ended leaving their replica's runs (``RunsLeft``, mixed into
``redis.RedisTaskStore``).

A run is in its replica's runs (``runs:<replica>``, the hub's slot) from its task's
creation; once it ends (or never began: a message sent again, or refused) it is *left*.
The replica's next turn looks at the tasks left (``settle_runs``), and its next beat takes
them out of the runs (``flush_runs``: the hub's slot only, so a tenant's primary away keeps
no beat from Redis). The look is for an end lost in a failover: with
``redis.wait_replicas`` 0 an end written to a primary (and answered) that failed over
before its replica had it is gone, the task WORKING on the new primary; out of the runs
nothing would ever end it, so it is ended FAILED (``LOST_END``) first.

Concurrency: ``_left`` and ``_settled`` are lists changed by the GIL's atomic operations
(the runs' threads append, the replica's turn takes them all).
"""
from __future__ import annotations

import logging

from redis import ResponseError

from murmur_wsgi.hub.store.base import StoreError
from murmur_wsgi.hub.store.redis_client import guarded as _guarded
from murmur_wsgi.hub.store.redis_keys import member, runs_key, split_member, task_key
from murmur_wsgi.hub.task import FAILED, TERMINAL, artifacts_of

logger = logging.getLogger(__name__)

# What a task whose run's end was lost in a failover ends with (``_lost_ends``).
LOST_END = "interrupted: its end was lost with a Redis primary that failed over"


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
        """Take the runs that ended (or never began) and were settled (``settle_runs``) out
        of this replica's runs (the beat's: the hub's slot only)."""
        if self._settled:
            left, self._settled[:] = list(self._settled), []
            try:
                self._redis.zrem(runs_key(self.replica), *left)
            except BaseException:
                self._settled.extend(left)          # the next beat tries again
                raise

    @_guarded
    def settle_runs(self) -> None:
        """The runs that ended since the last turn, looked at before the beat takes them out
        of the runs (``flush_runs``): one whose task Redis holds unended is ended first
        (``_lost_ends``). One whose task cannot be read or ended now (its tenant's primary
        away) is looked at again next turn, and stays listed meanwhile."""
        if not self._left:
            return
        left, self._left[:] = list(self._left), []
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
        kept = set()
        for found, state in zip(left, pipe.execute(raise_on_error=False)):
            if isinstance(state, Exception) and not isinstance(state, ResponseError):
                kept.add(found)         # its tenant's primary away (a cluster's node)
                continue
            if not isinstance(state, str) or state in TERMINAL:
                continue                # gone, ended, or no record to end (a bad key)
            tenant, task_id = split_member(found)
            try:
                artifacts = artifacts_of(self.logged(task_id, tenant)) or None
                self.end(task_id, FAILED, LOST_END, artifacts, [], tenant=tenant)
            except StoreError:
                kept.add(found)
                continue
            logger.warning("redis store: task %s ended FAILED: its end was lost with a "
                           "primary that failed over", task_id)
        return kept
