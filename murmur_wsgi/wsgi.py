"""The gunicorn target: ``murmur_wsgi.wsgi:app``, built from $MURMUR_WSGI_CONFIG.

The door (its session, tokens and locks) is built when this module is
imported. With ``preload_app`` off (``gunicorn_conf.py``) that happens in
the worker, after gevent has patched threading; never import it in the
master, or in a process that forks workers afterwards.
"""
from __future__ import annotations

import os

from murmur_wsgi.app import create_app

app = create_app(os.environ.get("MURMUR_WSGI_CONFIG", "conf/murmur.yaml"),
                 listen=os.environ.get("MURMUR_WSGI_LISTEN"))
