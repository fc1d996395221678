"""gunicorn settings for a worker whose collector is watched: the door's or the hub's
(``$GC_PROBE_APP``: ``door`` or ``hub``), with ``tests/gc_probe.py``'s hooks."""
import os

if os.environ.get("GC_PROBE_APP") == "door":
    from murmur_wsgi.door.gunicorn_conf import *  # noqa: F401,F403
else:
    from murmur_wsgi.hub.gunicorn_conf import *  # noqa: F401,F403
from tests import gc_probe

_app_post_worker_init = post_worker_init  # noqa: F405 - the application's own hook


def post_worker_init(worker):  # noqa: F811
    _app_post_worker_init(worker)
    gc_probe.watch_collections()


def pre_request(worker, req):
    gc_probe.boot_figures()


def worker_exit(server, worker):
    gc_probe.exit_figures()
