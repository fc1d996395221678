"""How long, how many and how many bytes of finished tasks a store keeps, per tenant
(hub.yaml's ``tasks``).

``tasks.retention_secs`` (default 7 days) is how long a finished task stays
after its end: long, because the Nexus A2A server text has a task outlive its
event log ("the task itself stays"), so GetTask and ListTasks answer for it
well after SubscribeToTask no longer can. ``tasks.max_per_tenant`` (default
100,000) bounds the finished tasks a tenant keeps, and ``tasks.max_bytes_per_tenant``
(default 1 GiB) their bytes (``task_bytes``, and their push configs': ``PushRecord.size``,
added and taken by their saves and deletes): past either, the oldest finished go first.
Each is overridable per tenant (``tenants.<name>.tasks``). A task still running is
never forgotten.

The byte cap is what bounds a store's memory: a task may hold a message of
``limits.max_body_bytes`` (1 MiB) several times over (its history, its first event, an
answer that echoes it and that answer's event), so the count alone let one tenant keep
hundreds of GB (a worker's memory store, or a shared Redis up to its ``maxmemory``, where
every tenant's writes then fail). 1 GiB is five times what 100,000 tasks of the demo's
take (about 2 KB each): tenants with ordinary tasks meet the count first, and the byte
cap bounds the large ones (size a store for a GiB a tenant, docs/hub.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from murmur_wsgi.wire.encode import utf8_bytes

RETENTION_SECS = 7 * 86_400.0
MAX_PER_TENANT = 100_000
MAX_BYTES_PER_TENANT = 1024 ** 3
TRIM_BATCH = 100                 # finished tasks one step forgets at most (the rest: next step)


def task_bytes(wire: str, payloads) -> int:
    """A finished task's bytes as a store keeps them: its wire form's and its events'
    payloads' (None: one rendered from the wire form; a tuple: the text its pieces join
    to), in UTF-8. The Redis store counts the same in its scripts (Lua's ``#``: a
    string's bytes)."""
    return sum(utf8_bytes(text) for payload in (wire, *payloads) if payload
               for text in ((payload,) if type(payload) is str else payload))


@dataclass(frozen=True)
class Retention:
    secs: float = RETENTION_SECS
    max_per_tenant: int = MAX_PER_TENANT
    tenants: dict = field(default_factory=dict)   # tenant -> {retention_secs?, max_per_tenant?,
    #                                               max_bytes_per_tenant?}
    # The Redis store's ends forget a whole batch at a time (redis_scripts' ``finish``): at
    # most this many, and a tenth of the tenant's cap (1 for a cap under 20), so a tenant
    # keeps less than a tenth more than its cap. 1: each end forgets what it puts past.
    batch: int = TRIM_BATCH
    max_bytes: int = MAX_BYTES_PER_TENANT

    def batch_of(self, cap: int) -> int:
        """The batch an end of a tenant of ``cap`` forgets at once."""
        return max(1, min(self.batch, cap // 10))

    def of(self, tenant: str) -> tuple[float, int, int]:
        """``(retention_secs, max_per_tenant, max_bytes_per_tenant)`` of ``tenant``."""
        block = self.tenants.get(tenant)
        if not block:
            return self.secs, self.max_per_tenant, self.max_bytes
        return (block.get("retention_secs", self.secs),
                block.get("max_per_tenant", self.max_per_tenant),
                block.get("max_bytes_per_tenant", self.max_bytes))

    @classmethod
    def from_config(cls, config) -> Retention:
        top = config.tasks
        return cls(top["retention_secs"], top["max_per_tenant"],
                   {tenant: block["tasks"] for tenant, block in config.tenants.items()},
                   max_bytes=top["max_bytes_per_tenant"])
