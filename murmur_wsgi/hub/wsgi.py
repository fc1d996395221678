"""The gunicorn target of the hub: ``murmur_wsgi.hub.wsgi:make_app()``, from $MURMUR_HUB_CONFIG_FILE.

A factory, called by gunicorn in the worker (``preload_app`` is off), after
gevent has patched threading; importing this module builds nothing. The
memory store lives in one process: the hub's gunicorn conf runs one worker.
"""
from __future__ import annotations

import os

from murmur_wsgi.hub.app import create_hub
from murmur_wsgi.hub.config import CONFIG_ENV
from murmur_wsgi.hub.keys import watch_keys


def make_app():
    """The hub of the file ``murmur-wsgi hub --config`` named (default conf/hub.yaml); its
    API keys follow that file and the store's table of keys (hub/keys.py)."""
    path = os.environ.get(CONFIG_ENV, "conf/hub.yaml")
    hub = create_hub(path)
    watch_keys(hub, path)
    return hub
