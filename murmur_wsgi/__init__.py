"""murmur_wsgi: the A2A v1.0 door of an agent runtime, as a WSGI application."""
from __future__ import annotations

__version__ = "0.1.0"


def create_app(manifest, agent=None, **kwargs):
    """Build the door's WSGI application; see :func:`murmur_wsgi.door.app.create_app`."""
    from murmur_wsgi.door.app import create_app as _create_app

    return _create_app(manifest, agent=agent, **kwargs)


__all__ = ["create_app", "__version__"]
