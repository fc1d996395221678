"""murmur_wsgi: two A2A v1.0 servers as WSGI applications, built from the same parts.

- the door (``murmur_wsgi.door``, :func:`create_app`): one agent, one session per process;
- the hub (``murmur_wsgi.hub``, :func:`murmur_wsgi.hub.create_hub`): many agents of many
  tenants under ``/a2a/v1/agents/:name``, API keys and JWTs, a memory or Redis store, push.
"""
from __future__ import annotations

__version__ = "0.1.0"


def create_app(manifest, agent=None, **kwargs):
    """Build the door's WSGI application; see :func:`murmur_wsgi.door.app.create_app`."""
    from murmur_wsgi.door.app import create_app as _create_app

    return _create_app(manifest, agent=agent, **kwargs)


__all__ = ["create_app", "__version__"]
