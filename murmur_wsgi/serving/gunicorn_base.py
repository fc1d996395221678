"""The gunicorn settings and hooks both applications' confs start from.

``door/gunicorn_conf.py`` and ``hub/gunicorn_conf.py`` import these (``from
murmur_wsgi.serving.gunicorn_base import *``) and add their own: the worker
class, the bind address, how many workers, and how the worker closes its
application (``serving/shutdown.py``). A conf of your own imports one of those
two, not this one.

The hooks here are the process groups' (``murmur_wsgi/groups.py``): a worker
killed outright (SIGKILL, a timeout, a crash) could not end the harnesses
and background commands it started, so the master ends them.
"""
import os

from murmur_wsgi.serving.shutdown import worker_int  # noqa: F401 - a gunicorn hook

# One worker: each application says whether it may run more (its nworkers_changed).
workers = 1
# Each held request and each open stream keeps one connection (and one file
# descriptor: raise `ulimit -n` above this) for as long as it lasts.
worker_connections = 10000
# The gevent worker's heartbeat runs on its own greenlet, so held requests and
# open streams do not trip this timeout; it only catches a blocked worker.
timeout = 60
# An upper bound only: the application closes its connections itself
# (serving/shutdown.py) and the worker exits within a second or two of SIGTERM.
graceful_timeout = 30
# Longer than nginx's upstream keepalive_timeout (60 s), so the proxy, not the
# server, closes an idle upstream connection; the hooks shut idle ones on stop.
keepalive = 75
# NOTE: no preload: the app (and every lock it holds) is created in the
# worker, after gevent has patched threading. A preloaded app would hold the
# master's real locks.
preload_app = False
# The applications write their own access log: one JSON line per request (murmur_wsgi.access).
accesslog = None
errorlog = "-"
loglevel = os.environ.get("MURMUR_WSGI_LOGLEVEL", "info")
# NOTE: gunicorn >= 25.1 opens a control socket at one fixed path per user
# ($XDG_RUNTIME_DIR or ~/.gunicorn/gunicorn.ctl): a second server on the host
# unlinks the first's, and its "worker add" would split a door's session. Older
# gunicorn ignores this name.
control_socket_disable = True


def child_exit(server, worker):
    """In the master, a worker is gone: SIGKILL the process groups it left running.

    A worker that stopped cleanly ended its own; one killed outright (SIGKILL,
    a timeout, a crash) could not, and its harnesses and background commands
    would run on into the next session.
    """
    from murmur_wsgi import groups

    where = groups.folder()
    ended = groups.end_recorded(where, worker.pid) if where else []
    if ended:
        server.log.warning("murmur-wsgi: worker %s left process groups %s; killed them",
                           worker.pid, ended)


def worker_abort(worker):
    """In the worker, gunicorn's timeout (SIGABRT): end the process groups it started."""
    from murmur_wsgi import groups

    where = groups.folder()
    ended = groups.end_recorded(where, os.getpid()) if where else []
    if ended:
        worker.log.warning("murmur-wsgi: worker timeout: killed the process groups %s it "
                           "started", ended)


def on_exit(server):
    """The master exits: its groups' folder goes with it."""
    from murmur_wsgi import groups

    where = groups.folder()
    if where:
        groups.remove_folder(where)


def post_fork(server, worker):
    """In the worker, before it loads the app: the logs as JSON lines on stderr."""
    from murmur_wsgi import logs

    logs.configure()
