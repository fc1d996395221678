"""The gunicorn target: ``murmur_wsgi.wsgi:app``, built from $MURMUR_WSGI_CONFIG."""
from __future__ import annotations

import os

from murmur_wsgi.app import create_app

app = create_app(os.environ.get("MURMUR_WSGI_CONFIG", "conf/murmur.yaml"),
                 listen=os.environ.get("MURMUR_WSGI_LISTEN"))
