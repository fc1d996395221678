"""The WSGI wrapper that mounts the door under a prefix in front of Django.

Django's URL resolver never sees ``/a2a``: the wrapper hands those requests
to the door with ``SCRIPT_NAME`` extended by the prefix and ``PATH_INFO``
shortened, as a WSGI mount does, so the card's interface URL names the mount
(``http://<host>/a2a``, or ``network.public_url`` when the manifest sets one).
"""
from __future__ import annotations

import atexit
import os

from murmur_wsgi import create_app as create_door

PREFIX = "/a2a"


class MountDoor:
    """Send ``prefix`` and every path under it to ``door``; every other path to ``app``."""

    def __init__(self, app, door, prefix: str = PREFIX):
        self.app = app
        self.door = door
        self.prefix = prefix.rstrip("/")

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == self.prefix or path.startswith(self.prefix + "/"):
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + self.prefix
            environ["PATH_INFO"] = path[len(self.prefix):]
            return self.door(environ, start_response)
        return self.app(environ, start_response)


def build_application(manifest=None, agent=None) -> MountDoor:
    """Django's WSGI application with the door under ``PREFIX``.

    ``manifest``: a mapping or a path (default ``$MURMUR_WSGI_CONFIG``, else
    the repository's ``conf/murmur.yaml``).
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djsite.settings")
    from django.core.wsgi import get_wsgi_application

    if manifest is None:
        here = os.path.dirname(os.path.abspath(__file__))
        manifest = os.environ.get("MURMUR_WSGI_CONFIG") or os.path.join(
            here, "..", "..", "..", "conf", "murmur.yaml")
    door = create_door(manifest, agent)
    # Under gunicorn the door's conf closes it as the worker stops; elsewhere, at exit.
    atexit.register(door.close)
    return MountDoor(get_wsgi_application(), door)
