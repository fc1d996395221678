"""The hub's stores: the interface (base) and the in-memory store (memory)."""
from __future__ import annotations

from murmur_wsgi.hub.store.base import PENDING, Store, StoredEvent


def open_store(config) -> Store:
    """The store ``config.store`` names (only ``memory`` in this version)."""
    from murmur_wsgi.hub.store.memory import MemoryStore

    return MemoryStore(retention_secs=config.events["retention_secs"])


__all__ = ["PENDING", "Store", "StoredEvent", "open_store"]
