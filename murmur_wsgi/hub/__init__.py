"""The hub: many agents of many tenants behind one address (docs/hub.md)."""
from __future__ import annotations


def create_hub(config):
    """Build the hub's WSGI application; see :func:`murmur_wsgi.hub.app.create_hub`."""
    from murmur_wsgi.hub.app import create_hub as _create_hub

    return _create_hub(config)


__all__ = ["create_hub"]
