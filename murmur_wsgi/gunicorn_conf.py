"""Default gunicorn settings for the door: one gevent worker, long-lived requests.

``conf/gunicorn.conf.py`` imports these; ``murmur-wsgi serve`` uses that file
when it exists, this module otherwise.
"""
import os

worker_class = "gevent"
# NOTE: the session lives in memory in one process; more workers would split it.
workers = 1
worker_connections = 4096
# The gevent worker's heartbeat runs on its own greenlet, so held requests and
# open streams do not trip this timeout; it only catches a blocked worker.
timeout = 60
graceful_timeout = 30
keepalive = 75
# NOTE: no preload: locks must be created after gevent patches threading.
preload_app = False
bind = [os.environ.get("MURMUR_WSGI_LISTEN", "127.0.0.1:41873")]
accesslog = None
errorlog = "-"
loglevel = os.environ.get("MURMUR_WSGI_LOGLEVEL", "info")
# NOTE: gunicorn >= 25.1 opens a control socket at one fixed path per user
# ($XDG_RUNTIME_DIR or ~/.gunicorn/gunicorn.ctl): a second door on the host
# unlinks the first's, and its "worker add" would split the session. Older
# gunicorn ignores this name.
control_socket_disable = True


def nworkers_changed(server, new_value, old_value):
    """Undo SIGTTIN: a second worker would hold a second, different session."""
    if old_value is not None and new_value > 1:   # None: setup, on_starting checks it
        server.log.error("murmur-wsgi: the session lives in one process; staying at 1 worker")
        server.num_workers = 1


def on_starting(server):
    """Refuse a configuration that would split the in-memory session."""
    if server.cfg.workers != 1:
        raise SystemExit("murmur-wsgi: the session lives in one process; run gunicorn with "
                         f"workers = 1 (got {server.cfg.workers})")
