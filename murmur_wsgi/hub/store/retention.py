"""How long and how many finished tasks a store keeps, per tenant (hub.yaml's ``tasks``).

``tasks.retention_secs`` (default 7 days) is how long a finished task stays
after its end: long, because the Nexus A2A server text has a task outlive its
event log ("the task itself stays"), so GetTask and ListTasks answer for it
well after SubscribeToTask no longer can. ``tasks.max_per_tenant`` (default
100,000) bounds the finished tasks a tenant keeps: past it, the oldest
finished go first. Both are overridable per tenant (``tenants.<name>.tasks``).
A task still running is never forgotten.
"""
from __future__ import annotations

from dataclasses import dataclass, field

RETENTION_SECS = 7 * 86_400.0
MAX_PER_TENANT = 100_000
TRIM_BATCH = 100                 # finished tasks one step forgets at most (the rest: next step)


@dataclass(frozen=True)
class Retention:
    secs: float = RETENTION_SECS
    max_per_tenant: int = MAX_PER_TENANT
    tenants: dict = field(default_factory=dict)   # tenant -> {retention_secs?, max_per_tenant?}
    # The Redis store's ends forget a whole batch at a time (redis_scripts' ``finish``): at
    # most this many, and a tenth of the tenant's cap (1 for a cap under 20), so a tenant
    # keeps less than a tenth more than its cap. 1: each end forgets what it puts past.
    batch: int = TRIM_BATCH

    def batch_of(self, cap: int) -> int:
        """The batch an end of a tenant of ``cap`` forgets at once."""
        return max(1, min(self.batch, cap // 10))

    def of(self, tenant: str) -> tuple[float, int]:
        """``(retention_secs, max_per_tenant)`` of ``tenant``."""
        block = self.tenants.get(tenant)
        if not block:
            return self.secs, self.max_per_tenant
        return (block.get("retention_secs", self.secs),
                block.get("max_per_tenant", self.max_per_tenant))

    @classmethod
    def from_config(cls, config) -> Retention:
        top = config.tasks
        return cls(top["retention_secs"], top["max_per_tenant"],
                   {tenant: block["tasks"] for tenant, block in config.tenants.items()})
