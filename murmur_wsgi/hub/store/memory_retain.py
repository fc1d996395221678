"""The memory store's retention of finished tasks: ``Retaining``, a part of ``MemoryTaskStore``.

A finished task is kept with its bytes (``retention.task_bytes``: its wire form and event
payloads as they are at its end, and its push configs', ``count_locked``) under its
tenant, in the order of their ends; it is forgotten (record, indexes, claim, events,
cancel mark, and push configs through ``on_forget``) ``tasks.retention_secs`` after its
end, or once its tenant has more than ``tasks.max_per_tenant`` finished, or their bytes
pass ``tasks.max_bytes_per_tenant`` (then down to a tenth below it, as on Redis), the
oldest first. Every end checks its tenant, and,
once every ``RETAIN_EVERY_SECS``, every tenant.

Concurrency: every method here runs under the store's ``lock`` (its name ends in
``_locked``, or it takes the lock itself), and uses the store's fields (memory.py).
"""
from __future__ import annotations

import collections

from murmur_wsgi.hub.store.retention import TRIM_BATCH, task_bytes
from murmur_wsgi.hub.task import HubTask, as_task

RETAIN_EVERY_SECS = 1.0            # how often a write looks at every tenant's oldest finished


class Retaining:
    """``MemoryTaskStore``'s finished tasks, kept and forgotten (see the module's doc)."""

    def on_forget(self, hook) -> None:
        """Call ``hook(task_id)`` (under ``lock``) as each task is forgotten."""
        self._forget_hooks.append(hook)

    def _finish_locked(self, task) -> None:
        now, tenant = self.clock(), task.tenant
        finished = self._finished.get(tenant)
        if finished is None:
            finished = self._finished[tenant] = collections.OrderedDict()
        size = task_bytes(HubTask.record_json(self._tasks[task.id], tenant, task.agent),
                          self._events.get(task.id, ())) + self._push_bytes.pop(task.id, 0)
        finished[task.id] = (now, size)
        kept = self._finished_bytes[tenant] = self._finished_bytes.get(tenant, 0) + size
        secs, cap, max_bytes = self._keep.of(tenant)
        if len(finished) > cap or kept > max_bytes or \
                next(iter(finished.values()))[0] + secs <= now:
            self._retain_locked(tenant, now)
        if now - self._retained_at >= RETAIN_EVERY_SECS:
            self._retained_at = now
            for tenant in list(self._finished):
                self._retain_locked(tenant, now)

    def count_locked(self, tenant: str, task_id: str, added: int) -> None:
        """Add ``added`` bytes (its push configs', ``push_base``) to the kept task's (the
        caller holds ``lock``): to its tenant's at once once it finished, else at its end.
        Retention acts on them at the tenant's next end, or the sweep."""
        finished = self._finished.get(tenant)
        if finished is not None and task_id in finished:
            ended, size = finished[task_id]
            finished[task_id] = (ended, size + added)
            self._finished_bytes[tenant] += added
        elif task_id in self._tasks:
            self._push_bytes[task_id] = self._push_bytes.get(task_id, 0) + added

    def _retain_locked(self, tenant: str, now: float) -> None:
        """Forget the tenant's oldest finished tasks past its cap, its bytes or their time
        (past the bytes, down to a tenth below them, as the Redis store does, at most
        ``TRIM_BATCH`` at once: the rest at the next end; never the newest for its bytes:
        not at its own end, whose push notifications are still to be sent, but at the
        next)."""
        secs, cap, max_bytes = self._keep.of(tenant)
        finished, kept = self._finished[tenant], self._finished_bytes[tenant]
        floor = max_bytes - max_bytes // 10 if kept > max_bytes else max_bytes
        for _ in range(max(len(finished) - cap, 0) + TRIM_BATCH):
            if not finished:
                break
            task_id, (ended, size) = next(iter(finished.items()))
            heavy = kept > floor and len(finished) > 1
            if len(finished) <= cap and not heavy and ended + secs > now:
                break
            del finished[task_id]
            kept -= size
            self._forget_locked(task_id)
        self._finished_bytes[tenant] = kept
        if not finished:
            del self._finished[tenant], self._finished_bytes[tenant]

    def _forget_locked(self, task_id: str) -> None:
        task = self._tasks.pop(task_id, None)
        if task is None:
            return
        task = as_task(task)
        self._indexes.remove(task)
        key = (task.tenant, task.agent, task.message_id)
        if self._claims.get(key) == task_id:
            del self._claims[key]
        self._events.pop(task_id, None)
        self._expiry.pop(task_id, None)
        self._marks.discard(task_id)
        self._push_bytes.pop(task_id, None)
        self._readers.wake(task_id)
        for hook in self._forget_hooks:
            hook(task_id)

    def expire_finished(self) -> None:
        with self.lock:
            now = self.clock()
            for tenant in list(self._finished):
                self._retain_locked(tenant, now)
