"""Retention of finished tasks on Redis (``Forgetting``, mixed into ``redis.RedisTaskStore``).

A task's end (END, or CREATE of a task refused at once) adds it to its tenant's
``done`` (its bytes in ``sizes``, their sum in ``bytes``) and names the tenant's tasks to
forget now (``redis_scripts``: past ``tasks.max_per_tenant``, ended more than
``tasks.retention_secs`` ago, or past ``tasks.max_bytes_per_tenant``: down to a tenth
below it), when they make a whole batch (``Retention.batch_of``: a tenth of the cap, at
most 100) or are past the bytes: a tenant at its cap forgets a batch at one end a batch,
not its oldest at each (two more round trips at every message: about a third fewer
blocking SendMessages a second, docs/performance.md); no script may name a key its
caller did not declare, so forgetting is two steps: the tasks' names read (agent,
context, messageId, state: one round trip to the tenant's slot), then one ``FORGET``
script given every key of each, which forgets a task (and takes its bytes from
``sizes`` and ``bytes``) only while it is still in ``done``. ``expire_finished`` does
the same for the ``done`` of every tenant named in the hub's ``tenants`` (each tenant's
first end in a process lists it there, ``_listing``: sent before that end's script) and
of every tenant of hub.yaml, not for every key a ``SCAN`` meets: its Redis work goes by
tenants, not by keys (PERF: a ``SCAN`` of one tenant's 100,000 tasks, 400,000 keys, took
0.5 s of Redis at every sweep of every replica, every 5 s).

Concurrency: ``_forgetting`` (the tenants whose batch this process forgets now) is
guarded by ``_forget_lock``, a plain Lock under no Condition; ``_listed`` (the tenants
this process listed in ``tenants``) is changed by the GIL's atomic set operations (a
tenant listed twice by two threads costs one ``SADD`` more).
"""
from __future__ import annotations

import functools
import logging
import threading

from murmur_wsgi.hub.store.base import each_then_raise
from murmur_wsgi.hub.store.redis_client import guarded as _guarded
from murmur_wsgi.hub.store.redis_cluster import FAILURES
from murmur_wsgi.hub.store.redis_keys import (TENANTS, both_key, configs_key, events_key,
                                              index_key, mark_key, member, msg_key,
                                              retained_keys, split_member, state_key,
                                              task_key, updated_key)


logger = logging.getLogger(__name__)


class Forgetting:
    """The forgetting of a tenant's oldest finished tasks, every key of each."""

    def _forgetting_init(self) -> None:
        self._forget_lock = threading.Lock()
        # The tenants whose batch this process forgets now: how many ends came meanwhile.
        self._forgetting: dict[str, int] = {}     # guarded by _forget_lock
        self._listed: set[str] = set()            # tenants this process put in ``tenants``

    def _listing(self, tenant: str) -> tuple:
        """The command that lists ``tenant`` in the hub's ``tenants`` (the sweep's), sent
        before an end's script (its caller adds it to ``_listed`` once that succeeds), or
        none: this process listed it already."""
        return () if tenant in self._listed else (("SADD", TENANTS, member(tenant)),)

    def _forget_after(self, tenant: str, task_ids: list) -> None:
        """``_forget`` after an end that is written: a failure there is not the end's (the
        tasks stay in ``done``: the next end, or the sweep's ``expire_finished``, forgets
        them). An end whose tenant's batch this process forgets already leaves it to that
        one, which reads the tenant's tasks to forget again once its batch is forgotten
        (``_doomed``, a whole batch or none) for each of them, and again for a batch
        another replica forgot some of first: the ends forget no more than a batch each,
        as one end alone (a tenant far past its cap, its cap lowered, is the sweep's).

        PERF: with 16 messages in flight, every end at a batch's turn forgot it again
        (its names read, the script run: twelve times each task, at a tenant's cap).
        NOTE: not left at that: each end left so put one more task past the cap, which
        only the sweep forgot (8 threads ending 10 tasks each at a cap of 3 kept 68)."""
        if not task_ids:
            return
        with self._forget_lock:
            if tenant in self._forgetting:
                self._forgetting[tenant] += 1
                return
            self._forgetting[tenant] = 0
        try:
            # A batch each end is owed (none once no whole batch is due); one another
            # replica forgot first is read again.
            owed = int(self._forget(tenant, task_ids) < len(task_ids))
            while True:
                with self._forget_lock:
                    owed += self._forgetting[tenant]
                    self._forgetting[tenant] = 0
                    if not owed:
                        del self._forgetting[tenant]    # no end came since the last read
                        return
                task_ids = self._doomed(tenant, True)
                if not task_ids:
                    owed = 0
                elif self._forget(tenant, task_ids) == len(task_ids):
                    owed -= 1
        except FAILURES as ex:
            logger.warning("redis store: forgetting finished tasks failed: %s",
                           type(ex).__name__)
        finally:
            with self._forget_lock:
                self._forgetting.pop(tenant, None)

    def _doomed(self, tenant: str, whole: bool = False) -> list:
        """The tenant's finished tasks to forget now (a batch, the oldest first); ``whole``:
        none unless a whole batch is due, as at an end."""
        keep, cap, batch, max_bytes = self._kept(tenant)
        return self._scripts["DOOMED"](keys=list(retained_keys(tenant)),
                                       args=[cap, keep, batch, max_bytes, int(whole)])

    def _forget(self, tenant: str, task_ids: list) -> int:
        """Forget the tenant's finished ``task_ids`` (the oldest, past retention) with every
        key of each: their names read, then one script; how many it forgot."""
        if not task_ids:
            return 0
        # NOTE: not sent again to a slot's importing node (``asking``): it would answer
        # nothing for the records not moved yet, and those tasks' sets keep their members.
        fields = self._command.several(*[("HMGET", task_key(tenant, task_id), "agent", "ctx",
                                           "msg", "state") for task_id in task_ids],
                                       asking=False)
        keys = [*retained_keys(tenant)]
        for task_id, (agent, context_id, message_id, state) in zip(task_ids, fields):
            agent, context_id = agent or "", context_id or ""
            keys += [task_key(tenant, task_id), events_key(tenant, task_id),
                     configs_key(tenant, task_id), mark_key(tenant, task_id),
                     index_key(tenant, agent), index_key(tenant, agent, context_id),
                     state_key(tenant, agent, state or ""),
                     both_key(tenant, agent, state or "", context_id),
                     updated_key(tenant, agent), msg_key(tenant, agent, message_id or "")]
        return int(self._scripts["FORGET"](keys=keys, args=list(task_ids)))

    @_guarded
    def expire_finished(self):
        # NOTE: hub.yaml's tenants too: those that ended tasks before ``tenants`` existed.
        # One tenant whose keys fail (a cluster without its primary, a key of the wrong
        # type) keeps no other tenant from its retention: raised after them.
        listed = {split_member(found)[0] for found in self._redis.smembers(TENANTS)}
        each_then_raise(functools.partial(self._expire, tenant)
                        for tenant in sorted(listed | set(self._keep.tenants)))

    @_guarded
    def _expire(self, tenant: str) -> None:
        """Forget the tenant's finished tasks past its retention, a batch at a time."""
        batch = self._kept(tenant)[2]
        while True:                       # NOTE: each call a batch, so Redis serves others
            if self._forget(tenant, self._doomed(tenant)) < batch:
                break

