"""Admission per tenant: runs at once, runs per minute (a token bucket), the optional hook.

A refused admission starts nothing: the task answers REJECTED with the
reason as its public status message.

Concurrency:
    ``_lock`` guards ``_running`` and ``_buckets``; ``admit`` takes a slot
    and a token in one step under it, ``release`` gives the slot back. The
    hook (the operator's code) is called before, outside the lock.
"""
from __future__ import annotations

import logging
import threading
import time

from murmur_wsgi.hub.config import ConfigError
from murmur_wsgi.loading import import_callable

logger = logging.getLogger(__name__)


def load_hook(spec: str, where: str):
    """Import ``pkg.mod:callable``; a bad spec is a ConfigError naming ``where``."""
    return import_callable(spec, where, ConfigError)


class Admission:
    """Decides whether a tenant may start one more run now."""

    def __init__(self, config, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._limits = {t: config.tenant_limits(t) for t in config.tenants}
        self._hooks = {}
        for tenant, block in config.tenants.items():
            if block["admission"]:
                self._hooks[tenant] = load_hook(block["admission"],
                                                f"tenants.{tenant}.admission")
        self._running: dict[str, int] = {}              # guarded by _lock
        self._buckets: dict[str, tuple[float, float]] = {}   # tenant -> (tokens, at)

    def running(self, tenant: str) -> int:
        return self._running.get(tenant, 0)

    def admit(self, tenant: str, agent: str, text: str) -> str | None:
        """Take a slot and a token; return None, or the public reason of a refusal."""
        hook = self._hooks.get(tenant)
        if hook is not None:
            try:
                reason = hook(tenant, agent, text)
            except Exception:  # noqa: BLE001 - the operator's hook failing refuses, logged
                logger.exception("the admission hook of tenant %s failed", tenant)
                return "admission is not available right now"
            if reason is not None:
                return str(reason)
        limits = self._limits[tenant]
        with self._lock:
            if self._running.get(tenant, 0) >= limits["concurrency"]:
                return (f"concurrency limit reached: {limits['concurrency']} runs at once "
                        "for this tenant")
            rate = limits["rate_per_minute"]
            now = self._clock()
            tokens, at = self._buckets.get(tenant, (float(rate), now))
            tokens = min(float(rate), tokens + (now - at) * rate / 60.0)
            if tokens < 1.0:
                self._buckets[tenant] = (tokens, now)
                return f"rate limit reached: {rate} runs per minute for this tenant"
            self._buckets[tenant] = (tokens - 1.0, now)
            self._running[tenant] = self._running.get(tenant, 0) + 1
        return None

    def release(self, tenant: str) -> None:
        with self._lock:
            self._running[tenant] = max(0, self._running.get(tenant, 0) - 1)
