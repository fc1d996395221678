"""The hub's stores: the interface (base), in memory (memory) and on Redis (redis)."""
from __future__ import annotations

from murmur_wsgi.hub.store.base import PENDING, Store, StoreError, StoredEvent


def open_store(config) -> Store:
    """The store ``config.store`` names: ``memory``, or a Redis URL (``config.store_url``)."""
    if config.store == "memory":
        from murmur_wsgi.hub.store.memory import MemoryStore

        return MemoryStore(retention_secs=config.events["retention_secs"])
    from murmur_wsgi.hub.store.redis_push import RedisPushStore

    settings = config.redis
    return RedisPushStore(config.store_url(), retention_secs=config.events["retention_secs"],
                      timeout_secs=settings["timeout_secs"],
                      liveness_secs=settings["liveness_secs"],
                      max_events=settings["max_events_per_task"])


__all__ = ["PENDING", "Store", "StoreError", "StoredEvent", "open_store"]
