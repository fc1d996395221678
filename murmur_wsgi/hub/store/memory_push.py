"""Push configs and leases in memory (one process; push_base.py's contract).

Beside a ``MemoryTaskStore``: its fields are guarded by the task store's
``lock``, and ``push_due`` waits on the task store's ``changed`` condition,
which every write of an event notifies.

MEMORY: a config is kept as its ``PushRecord.row()`` under its key, and a task's
configs as a tuple of their ids: tuples of strings and numbers, which Python's garbage
collector stops tracking at its first look. Kept as records in a dict per task, a task's
configs stayed tracked objects for as long as the task is kept (up to
``tasks.max_per_tenant`` tasks of ``MAX_CONFIGS_PER_TASK`` configs a tenant), each full
collection walking them with the worker stopped (docs/performance.md).
"""
from __future__ import annotations

import logging

from murmur_wsgi.hub.store.push_base import (DELIVERED, DROPPED, LEASE_SECS,
                                             MAX_CONFIGS_PER_TASK, MAX_FAILURES,
                                             TASK_GONE, TENANT_DELIVERIES, PushRecord,
                                             PushStorage)
from murmur_wsgi.wire.task import now_ms

logger = logging.getLogger(__name__)


class MemoryPushStore(PushStorage):
    """Fields (guarded by the task store's ``lock``): configs by task, leases, the active set."""

    def __init__(self, tasks):
        self._tasks = tasks
        self.lock = tasks.lock
        self._changed = tasks.changed
        self._clock = tasks.clock
        tasks.on_forget(self._forget_locked)
        self._push: dict[tuple, tuple] = {}            # key -> the config's row
        self._push_ids: dict[str, tuple] = {}          # task id -> its configs' ids
        # tenant -> {key: None}: the keys that may have events to deliver, oldest first
        self._push_active: dict[str, dict[tuple, None]] = {}
        self._push_leases: dict[tuple, tuple] = {}     # key -> (owner, tenant, deadline)
        self._push_created = 0
        self._poked = False        # guarded by lock: notify_push came while no turn waited

    def _forget_locked(self, task_id: str) -> None:
        """The task is forgotten (retention): its configs go with it (their bytes were its:
        its tenant's kept bytes lost them with it); a lease stays until its delivery gives
        it back, as after a delete."""
        for config_id in self._push_ids.pop(task_id, ()):
            key = (task_id, config_id)
            self._inactive(self._push.pop(key)[0], key)

    def _push_log(self, task_id: str) -> tuple[int, bool] | None:
        """``(events in the task's log, whether it ended)``, None once it expired."""
        return self._tasks.log_locked(task_id)

    def push_save(self, record, from_start):
        with self._changed:
            if not self._tasks.kept_locked(record.task_id):
                return TASK_GONE
            ids = self._push_ids.get(record.task_id, ())
            old = self._push.get(record.key)
            if old is None and len(ids) >= MAX_CONFIGS_PER_TASK:
                return None
            old = None if old is None else PushRecord(*old)
            log = self._push_log(record.task_id)
            cursor = 0 if from_start or log is None else log[0]
            self._push_created += 1
            saved = record.but(cursor=cursor, failures=0, disabled=False, disabled_ms=None,
                               last_error=None,
                               generation=(old.generation + 1) if old else 1,
                               created=old.created if old else self._push_created)
            self._push[saved.key] = saved.row()
            if old is None:
                self._push_ids[record.task_id] = ids + (record.id,)
            self._tasks.count_locked(record.tenant, record.task_id,
                                     saved.size - (old.size if old else 0))
            self._push_active.setdefault(saved.tenant, {})[saved.key] = None
            self._changed.notify_all()
            return saved

    def _push_find(self, tenant, agent, task_id, config_id):
        row = self._push.get((task_id, config_id))
        if row is None or row[0] != tenant or row[1] != agent:
            return None
        return PushRecord(*row)

    def push_get(self, tenant, agent, task_id, config_id):
        with self.lock:
            return self._push_find(tenant, agent, task_id, config_id)

    def push_list(self, tenant, agent, task_id):
        with self.lock:
            rows = [self._push[(task_id, config_id)]
                    for config_id in self._push_ids.get(task_id, ())]
            return sorted((PushRecord(*row) for row in rows
                           if row[0] == tenant and row[1] == agent), key=lambda r: r.created)

    def push_delete(self, tenant, agent, task_id, config_id):
        with self._changed:
            found = self._push_find(tenant, agent, task_id, config_id)
            if found is None:
                return False
            del self._push[(task_id, config_id)]
            self._tasks.count_locked(tenant, task_id, -found.size)
            ids = tuple(i for i in self._push_ids.pop(task_id) if i != config_id)
            if ids:
                self._push_ids[task_id] = ids
            # NOTE: its lease stays until its delivery gives it back (or it runs out): the
            # delivery goes on to the end of its event, and its slot is its tenant's.
            self._inactive(tenant, (task_id, config_id))
            self._changed.notify_all()
            return True

    def _inactive(self, tenant: str, key: tuple) -> None:
        keys = self._push_active.get(tenant)
        if keys is not None:
            keys.pop(key, None)
            if not keys:
                del self._push_active[tenant]

    def _push_due_locked(self, skip) -> list:
        """The configs that can be leased now: of each tenant, at most as many as its free
        delivery slots (``TENANT_DELIVERIES`` less its leases), its oldest first.

        PERF: every event written wakes the dispatcher, which calls this under the store's
        lock: a tenant whose slots are taken costs nothing, and one with a backlog of due
        configs (a receiver slower than its events) is read only up to its free slots, not
        whole (10,000 configs due behind a receiver that never answered cost 37 ms a wake
        when they were all read, each then refused its lease)."""
        now = self._clock()
        held: dict[str, int] = {}
        for _owner, tenant, deadline in self._push_leases.values():
            if deadline > now:
                held[tenant] = held.get(tenant, 0) + 1
        due = []
        for tenant, keys in list(self._push_active.items()):
            free = TENANT_DELIVERIES - held.get(tenant, 0)
            if free <= 0:
                continue
            done = []
            for key in keys:
                row = self._push.get(key)
                record = None if row is None else PushRecord(*row)
                log = self._push_log(key[0])
                if record is None or record.disabled or log is None:
                    done.append(key)
                    continue
                count, ended = log
                if record.cursor >= count:
                    if ended:
                        done.append(key)
                    continue
                lease = self._push_leases.get(key)
                if key in skip or (lease is not None and lease[2] > now):
                    continue
                due.append(record)
                free -= 1
                if not free:
                    break
            for key in done:
                self._inactive(tenant, key)
        return due

    def push_due(self, owner, timeout, skip=frozenset()):
        with self._changed:
            self._tasks.expire_locked()
            due = self._push_due_locked(skip)
            if due or self._tasks.closed or self._poked:
                self._poked = False
                return due
            self._changed.wait(timeout)
            self._poked = False
            self._tasks.expire_locked()
            return self._push_due_locked(skip)

    def notify_push(self):
        # NOTE: kept until the next turn: a dispatcher's close() that came between its turns
        # waited a whole idle wait (1 s) for the loop it now waits for.
        with self._changed:
            self._poked = True
            self._changed.notify_all()

    def push_lease(self, record, owner):
        with self.lock:
            now = self._clock()
            lease = self._push_leases.get(record.key)
            if lease is not None and lease[0] != owner and lease[2] > now:
                return False
            if lease is None or lease[2] <= now:
                held = sum(1 for k, (o, tenant, deadline) in self._push_leases.items()
                           if tenant == record.tenant and deadline > now and k != record.key)
                if held >= TENANT_DELIVERIES:
                    return False
            self._push_leases[record.key] = (owner, record.tenant, now + LEASE_SECS)
            return True

    def push_release(self, record, owner):
        with self._changed:
            lease = self._push_leases.get(record.key)
            if lease is not None and lease[0] == owner:
                del self._push_leases[record.key]
            self._changed.notify_all()

    def push_advance(self, record, owner, seq, outcome, error=None):
        with self._changed:
            current = self._push.get(record.key)
            current = None if current is None else PushRecord(*current)
            lease = self._push_leases.get(record.key)
            if current is None or current.generation != record.generation or lease is None \
                    or lease[0] != owner or lease[2] <= self._clock():
                return None
            changes = {"cursor": max(current.cursor, seq)}
            if outcome == DROPPED:
                failures = current.failures + 1
                changes.update(failures=failures, last_error=error)
                if failures >= MAX_FAILURES:
                    changes.update(disabled=True, disabled_ms=now_ms())
            elif outcome == DELIVERED:
                changes["failures"] = 0
            saved = current.but(**changes)
            self._push[record.key] = saved.row()
            self._push_leases[record.key] = (owner, record.tenant, self._clock() + LEASE_SECS)
            self._changed.notify_all()
            return saved
