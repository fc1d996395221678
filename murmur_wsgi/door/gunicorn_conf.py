"""Default gunicorn settings for the door: one gevent worker, long-lived requests, a clean stop.

``conf/gunicorn.conf.py`` imports these; ``murmur-wsgi serve`` uses that file
when it exists, this module otherwise. A conf of your own can import them
too (``from murmur_wsgi.door.gunicorn_conf import *``) and override settings;
keep the hooks, they are how the door closes when gunicorn stops.

The settings and the process groups' hooks both applications share are
``serving/gunicorn_base.py``'s. Stopping (``serving/shutdown.py``): on SIGTERM
gunicorn's gevent worker stops accepting and then waits up to
``graceful_timeout`` for its connections to end; the worker closes the door as
soon as it starts stopping: held requests are answered with their task as it
stands, every stream writes ``capsule-closed`` and ends, background commands
are killed, and idle keep-alive connections are shut.
"""
import os
import signal

from murmur_wsgi.serving.gunicorn_base import *  # noqa: F401,F403 - shared settings and hooks
from murmur_wsgi.serving.shutdown import WorkerStop

# gunicorn's gevent worker, with the door's deadlines on reading a request (limits.*), a
# reserve of connections against a flood of idle ones, and write cuts counted: worker.py.
worker_class = "murmur_wsgi.door.worker.DoorWorker"
# NOTE: the session lives in memory in one process; more workers would split it.
workers = 1
bind = [os.environ.get("MURMUR_WSGI_LISTEN", "127.0.0.1:41873")]


def nworkers_changed(server, new_value, old_value):
    """Undo SIGTTIN: a second worker would hold a second, different session."""
    if old_value is not None and new_value > 1:   # None: setup, on_starting checks it
        server.log.error("murmur-wsgi: the session lives in one process; staying at 1 worker")
        server.num_workers = 1


def on_starting(server):
    """Refuse a configuration that would split the in-memory session; name the groups' folder.

    ``$MURMUR_WSGI_GROUPS``, inherited by the worker, is where it records the
    process groups it starts (``murmur_wsgi/groups.py``), so that
    ``child_exit`` can end them when the worker is killed outright.
    """
    if server.cfg.workers != 1:
        raise SystemExit("murmur-wsgi: the session lives in one process; run gunicorn with "
                         f"workers = 1 (got {server.cfg.workers})")
    home = os.environ.get("MURMUR_WSGI_HOME") or os.path.join(os.path.expanduser("~"),
                                                              ".murmur-wsgi")
    from murmur_wsgi import groups

    groups.prune(os.path.join(home, "groups"))
    os.environ[groups.GROUPS_ENV] = os.path.join(home, "groups", str(os.getpid()))


def post_worker_init(worker):
    """The app is loaded: close its doors when the worker stops (see the module's doc)."""
    _DoorStop(worker).install()


class _DoorStop(WorkerStop):
    """Closes the worker's doors as the worker stops; ``after_task: exit`` stops gunicorn."""

    def install(self) -> None:
        from murmur_wsgi.door.app import live_doors

        for door in live_doors():
            if door.stop_server is None:
                door.stop_server = self.stop_arbiter      # lifecycle.after_task: exit
        super().install()

    def close_apps(self) -> None:
        from murmur_wsgi.door.app import live_doors

        for door in live_doors():
            try:
                door.close()
            except Exception:  # noqa: BLE001 - one door failing to close must not keep the rest
                self.worker.log.exception("murmur-wsgi: closing the door failed")

    def stop_arbiter(self) -> None:
        """Ask gunicorn's arbiter to stop (after_task: exit); it then stops this worker."""
        if os.getppid() == self.worker.ppid:
            self.worker.log.info("murmur-wsgi: after_task: exit: stopping gunicorn")
            os.kill(self.worker.ppid, signal.SIGTERM)
