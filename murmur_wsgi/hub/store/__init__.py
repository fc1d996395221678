"""The hub's store, as four parts composed in one ``Stores`` bundle.

Each part is an interface with a memory and a Redis implementation:

- ``tasks`` (``base.TaskStore``): tasks, their events, claims, cancel marks,
  ListTasks' indexes and retention (``retention``) (``memory``, ``redis``);
- ``replicas`` (``replicas.ReplicaStore``): liveness, cancels heard from
  other replicas, the stale sweep (``replicas.LocalReplicas``, ``redis_replicas``);
- ``counters`` (``counters.Counters``): admission's runs at once and token
  buckets (``counters.LocalCounters``, ``redis_limits``);
- ``push`` (``push_base.PushStorage``): push configs and delivery leases
  (``memory_push``, ``redis_push``).

``open_stores(config)`` builds the bundle ``config.store`` names; the parts of
one bundle share one Redis connection (``redis_client.RedisConnection``), or,
in memory, the task store's lock.
"""
from __future__ import annotations

from dataclasses import dataclass

from murmur_wsgi.hub.store.base import (PENDING, StoreError, StoredEvent, StoreRefused,
                                        TaskStore)
from murmur_wsgi.hub.store.counters import Counters
from murmur_wsgi.hub.store.push_base import PushStorage
from murmur_wsgi.hub.store.replicas import ReplicaStore
from murmur_wsgi.hub.store.retention import Retention


@dataclass(frozen=True)
class Stores:
    tasks: TaskStore
    replicas: ReplicaStore
    counters: Counters
    push: PushStorage

    @property
    def shared(self) -> bool:
        """Other processes (replicas) use the same store."""
        return self.tasks.shared

    def close(self) -> None:
        self.tasks.close()


def memory_stores(*, retention_secs: float = 86_400.0, clock=None,
                  retention: Retention | None = None) -> Stores:
    """The four parts in this process's memory (``store: memory``); ``retention_secs`` is the
    event logs', ``retention`` the finished tasks'."""
    from murmur_wsgi.hub.store.counters import LocalCounters
    from murmur_wsgi.hub.store.memory import MemoryTaskStore
    from murmur_wsgi.hub.store.memory_push import MemoryPushStore
    from murmur_wsgi.hub.store.replicas import LocalReplicas

    extra = {} if clock is None else {"clock": clock}
    tasks = MemoryTaskStore(retention_secs=retention_secs, retention=retention, **extra)
    return Stores(tasks, LocalReplicas(tasks), LocalCounters(**extra), MemoryPushStore(tasks))


def redis_stores(url: str, *, retention_secs: float = 86_400.0, timeout_secs: float = 5.0,
                 liveness_secs: float = 10.0, max_events: int = 10_000,
                 replica_id: str | None = None, retention: Retention | None = None,
                 wait_replicas: int = 0, large_read_bytes: int | None = None,
                 tenant_read_bytes=None, max_connections: int | None = None) -> Stores:
    """The four parts on one Redis (``store: redis://…``, or the primary of
    ``redis-sentinel://…``), sharing one connection; ``wait_replicas``: the replicas
    each acknowledged write waits for (``redis_commands.Commands.durable``);
    ``large_read_bytes``: the large records read at once (``large_reads``), at most
    ``tenant_read_bytes(tenant)`` of them a tenant's;
    ``max_connections``: each pool's connections in use at once (``redis_pool``)."""
    from murmur_wsgi.hub.store.large_reads import MAX_BYTES, LargeReads
    from murmur_wsgi.hub.store.redis import RedisTaskStore
    from murmur_wsgi.hub.store.redis_client import RedisConnection
    from murmur_wsgi.hub.store.redis_limits import RedisCounters
    from murmur_wsgi.hub.store.redis_pool import MAX_CONNECTIONS
    from murmur_wsgi.hub.store.redis_push import RedisPushStore
    from murmur_wsgi.hub.store.redis_replicas import RedisReplicas

    conn = RedisConnection(url, timeout_secs=timeout_secs, liveness_secs=liveness_secs,
                           replica_id=replica_id, wait_replicas=wait_replicas,
                           max_connections=max_connections or MAX_CONNECTIONS)
    tasks = RedisTaskStore(conn, retention_secs=retention_secs, max_events=max_events,
                           retention=retention,
                           large_reads=LargeReads(large_read_bytes or MAX_BYTES, timeout_secs,
                                                  tenant_read_bytes))
    return Stores(tasks, RedisReplicas(conn, tasks), RedisCounters(conn), RedisPushStore(conn))


def open_stores(config) -> Stores:
    """The stores ``config.store`` names: ``memory``, or a Redis URL (``config.store_url``)."""
    events = config.events["retention_secs"]
    retention = Retention.from_config(config)
    if config.store == "memory":
        return memory_stores(retention_secs=events, retention=retention)
    settings = config.redis
    return redis_stores(config.store_url(), retention_secs=events,
                        timeout_secs=settings["timeout_secs"],
                        liveness_secs=settings["liveness_secs"],
                        max_events=settings["max_events_per_task"], retention=retention,
                        wait_replicas=settings["wait_replicas"],
                        large_read_bytes=config.limits["worker_answer_bytes"],
                        tenant_read_bytes=lambda tenant: config.tenant_limits(tenant)[
                            "answer_bytes"] if tenant in config.tenants else None,
                        max_connections=settings["max_connections"])


__all__ = ["PENDING", "StoreError", "StoredEvent", "StoreRefused", "Stores", "TaskStore", "memory_stores",
           "open_stores", "redis_stores"]
