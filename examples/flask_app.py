"""A Flask site with the door mounted under ``/a2a``, beside the site's own routes.

Werkzeug's ``DispatcherMiddleware`` sends every path under ``/a2a`` to the
door (with ``SCRIPT_NAME=/a2a``) and every other path to Flask. Run it from
the repository root:

    # Flask's development server (Werkzeug, threaded):
    flask --app examples.flask_app run

    # gunicorn -k gevent, one worker, with the door's settings and shutdown hooks:
    gunicorn -c conf/gunicorn.conf.py -b 127.0.0.1:8000 'examples.flask_app:create_app()'

The manifest is ``$MURMUR_WSGI_CONFIG`` (default ``conf/murmur.yaml``). The
card is at ``/a2a/.well-known/agent-card.json``, and its interface URL names
the mount: ``http://<the request's host>/a2a``, or ``network.public_url``
when the manifest sets one (set it to the URL clients use, prefix included,
e.g. ``https://example.com/a2a``). A2A clients POST to that URL.
"""
from __future__ import annotations

import atexit
import os

from flask import Flask, jsonify
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from murmur_wsgi import create_app as create_door

PREFIX = "/a2a"


def create_app(manifest=None, agent=None) -> Flask:
    """The site: its own routes, and the door under ``PREFIX``.

    ``manifest`` is a mapping or a path (default: ``$MURMUR_WSGI_CONFIG`` or
    ``conf/murmur.yaml``); ``agent`` an optional callable serving the tasks.
    """
    site = Flask(__name__)
    door = create_door(manifest or os.environ.get("MURMUR_WSGI_CONFIG", "conf/murmur.yaml"),
                       agent)
    site.extensions["murmur_door"] = door

    @site.get("/")
    def index():
        return jsonify(site="flask example", a2a=PREFIX)

    @site.get("/health")
    def health():
        return jsonify(door="closing" if door.session.closing else "open",
                       session=door.session.id)

    site.wsgi_app = DispatcherMiddleware(site.wsgi_app, {PREFIX: door})
    # Under gunicorn the door's conf closes it when the worker stops; elsewhere (flask run)
    # close it at exit, so its background commands do not outlive the process.
    atexit.register(door.close)
    return site
