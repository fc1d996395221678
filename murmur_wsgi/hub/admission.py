"""Admission per tenant: runs at once, runs per minute (a token bucket), the optional hook.

A refused admission starts nothing: the task answers REJECTED with the
reason as its public status message. The counts are the store's counters
(``store/counters.py``): in this process (the memory store: one process), or
in Redis for every replica and worker of the hub (``store/redis_limits.py``).
The hook (the operator's code) is called before the counters, outside any lock.
"""
from __future__ import annotations

import logging
import time

from murmur_wsgi.agents.endings import check_text
from murmur_wsgi.hub.config import ConfigError
from murmur_wsgi.hub.store.base import Opened
from murmur_wsgi.hub.store.counters import CONCURRENCY, RATE, LocalCounters
from murmur_wsgi.loading import import_callable

logger = logging.getLogger(__name__)

def load_hook(spec: str, where: str):
    """Import ``pkg.mod:callable``; a bad spec is a ConfigError naming ``where``."""
    return import_callable(spec, where, ConfigError)


class Admission:
    """Decides whether a tenant may start one more run now."""

    def __init__(self, config, counters=None, clock=time.monotonic):
        self.counters = counters if counters is not None else LocalCounters(clock)
        self._limits = config.tenant_limits      # merged once, by the config
        self._hooks = {}
        for tenant, block in config.tenants.items():
            if block["admission"]:
                self._hooks[tenant] = load_hook(block["admission"],
                                                f"tenants.{tenant}.admission")

    def running(self, tenant: str) -> int:
        return self.counters.running(tenant)

    def admit(self, tenant: str, agent: str, text: str, task_id: str) -> str | None:
        """Take a slot and a token for ``task_id``; return None, or the public reason of a
        refusal. Raises StoreError when shared counters cannot be reached."""
        reason = self._hook_reason(tenant, agent, text)
        if reason is not None:
            return reason
        limits = self._limits(tenant)
        return self._reason(tenant, self.counters.take(tenant, task_id, limits["concurrency"],
                                                       limits["rate_per_minute"]))

    def open(self, store, task, text: str, event: str) -> Opened:
        """Accept ``task``'s message: its messageId's claim, admission, the task stored and
        started, in one store step (``TaskStore.open``) unless the tenant has a hook, which
        is called between the claim and the counters. What it came to: ``found`` (the
        messageId's task, or PENDING), ``reason`` (refused, the public reason: nothing
        stored), else the run may start: ``started`` is its task's WORKING statusUpdate,
        stored. Raises StoreError."""
        tenant = task.tenant
        limits = self._limits(tenant)
        claimed = tenant in self._hooks
        if claimed:
            found = store.claim_message(tenant, task.agent, task.message_id)
            if found is not None:
                return Opened(found=found)
            reason = self._hook_reason(tenant, task.agent, text)
            if reason is not None:
                return Opened(reason=reason)            # the claim is the caller's to release
        opened = store.open(task, event, self.counters, limits["concurrency"],
                            limits["rate_per_minute"], claimed=claimed)
        if opened.refused is not None:
            opened.reason = self._reason(tenant, opened.refused)
        return opened

    def _hook_reason(self, tenant: str, agent: str, text: str) -> str | None:
        hook = self._hooks.get(tenant)
        if hook is None:
            return None
        try:
            reason = hook(tenant, agent, text)
            # NOTE: the reason is stored as the task's status: one no UTF-8 holds (a lone
            # surrogate) made every answer holding the task fail.
            return None if reason is None else check_text(str(reason), "its reason")
        except Exception:  # noqa: BLE001 - the operator's hook failing refuses, logged
            logger.exception("the admission hook of tenant %s failed", tenant)
            return "admission is not available right now"

    def _reason(self, tenant: str, refused: str | None) -> str | None:
        limits = self._limits(tenant)
        if refused == CONCURRENCY:
            return (f"concurrency limit reached: {limits['concurrency']} runs at once "
                    "for this tenant")
        if refused == RATE:
            return f"rate limit reached: {limits['rate_per_minute']} runs per minute for this tenant"
        return None

    def release(self, tenant: str, task_id: str) -> None:
        """Give back ``task_id``'s slot (StoreError: shared counters free it by themselves)."""
        self.counters.give(tenant, task_id)

    def hold(self, tenant: str, member: str) -> None:
        """Keep a slot under ``member`` (see ``counters.overdue_member``) for a run whose task ended
        while its agent executes; ``release(tenant, member)`` gives it back once the agent
        returns. Taken before the task's own slot is given back, so the count never dips.
        Raises StoreError when shared counters cannot be reached."""
        self.counters.hold(tenant, member)

    def renew(self, runs: list) -> None:
        """Keep the slots of the runs this replica runs (shared counters lease them)."""
        self.counters.renew([(run.tenant, run.task_id) for run in runs])
