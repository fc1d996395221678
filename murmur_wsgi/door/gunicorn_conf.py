"""Default gunicorn settings for the door: one gevent worker, long-lived requests, a clean stop.

``conf/gunicorn.conf.py`` imports these; ``murmur-wsgi serve`` uses that file
when it exists, this module otherwise. A conf of your own can import them
too (``from murmur_wsgi.door.gunicorn_conf import *``) and override settings;
keep the hooks, they are how the door closes when gunicorn stops.

Stopping: on SIGTERM gunicorn's gevent worker stops accepting and then
waits up to ``graceful_timeout`` for its connections to end. Held requests,
streams and idle keep-alive connections would all wait it out, so the hooks
below (installed by ``post_worker_init``) close the door as soon as the
worker starts stopping: held requests are answered with their task as it
stands, every stream writes ``capsule-closed`` and ends, background commands
are killed, and idle keep-alive connections are shut. The close runs from
the worker's own loop (its ``notify()``), never inside a signal handler.
"""
import os
import signal
import socket

# gunicorn's gevent worker, with the door's deadlines on reading a request (limits.*), a
# reserve of connections against a flood of idle ones, and write cuts counted: worker.py.
worker_class = "murmur_wsgi.door.worker.DoorWorker"
# NOTE: the session lives in memory in one process; more workers would split it.
workers = 1
# Each held request and each open stream keeps one connection (and one file
# descriptor: raise `ulimit -n` above this) for as long as it lasts.
worker_connections = 10000
# The gevent worker's heartbeat runs on its own greenlet, so held requests and
# open streams do not trip this timeout; it only catches a blocked worker.
timeout = 60
# An upper bound only: the door closes its connections itself (see above) and
# the worker exits within a second or two of SIGTERM.
graceful_timeout = 30
# Longer than nginx's upstream keepalive_timeout (60 s), so the proxy, not the
# door, closes an idle upstream connection; the hooks shut idle ones on stop.
keepalive = 75
# NOTE: no preload: the app (and every lock of the session) is created in the
# worker, after gevent has patched threading. A preloaded app would hold the
# master's real locks, and its session would not be the worker's.
preload_app = False
bind = [os.environ.get("MURMUR_WSGI_LISTEN", "127.0.0.1:41873")]
# The door writes its own access log: one JSON line per request (murmur_wsgi.access).
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
    """In the worker, before it loads the app: the door's logs as JSON lines on stderr."""
    from murmur_wsgi import logs

    logs.configure()


def post_worker_init(worker):
    """The app is loaded: close its doors when the worker stops (see the module's doc)."""
    _WorkerStop(worker).install()


def worker_int(worker):
    """SIGINT or SIGQUIT, gunicorn's quick stop: close the doors before the worker exits."""
    stop = getattr(worker, "murmur_stop", None)
    if stop is not None:
        stop.stopping()


def _shut(sock) -> None:
    """Shut a connection's socket so that its blocked read sees the end, and gunicorn closes it.

    Through a second socket object on the same descriptor: gevent's own
    ``shutdown()`` would cancel the reader's wait with EBADF, which gunicorn
    logs as a socket error; a plain end of input is a quiet close.
    """
    try:
        twin = socket.socket(fileno=sock.fileno())
    except OSError:
        return                              # closed meanwhile
    try:
        twin.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        twin.detach()


class _WorkerStop:
    """Closes the worker's doors, and its idle keep-alive connections, as the worker stops.

    Installed on the worker instance (its class is untouched): ``handle`` and
    ``handle_request`` track which connections are inside a request;
    ``notify`` (called every second by the gevent worker's loop, also while
    it drains) closes the doors and shuts the idle connections once the
    worker is no longer alive; ``run`` closes the doors on its way out when
    no connection was left to drain. A connection that finishes a request
    after the worker stopped is closed rather than kept alive.
    """

    def __init__(self, worker):
        self.worker = worker
        self.connections = {}        # client socket -> inside a request (the worker's greenlets)
        self.closed = False

    def install(self) -> None:
        from murmur_wsgi.door.app import live_doors

        worker = self.worker
        worker.murmur_stop = self
        for door in live_doors():
            if door.stop_server is None:
                door.stop_server = self.stop_arbiter      # lifecycle.after_task: exit
        from gunicorn.workers.base_async import AsyncWorker

        if isinstance(worker, AsyncWorker):
            # gevent's (and eventlet's) worker: one handle() per connection, one
            # handle_request() per request. Other workers only get the doors closed.
            self._handle, worker.handle = worker.handle, self.handle
            self._handle_request, worker.handle_request = (worker.handle_request,
                                                           self.handle_request)
        self._notify, worker.notify = worker.notify, self.notify
        self._run, worker.run = worker.run, self.run

    def handle(self, listener, client, addr):
        self.connections[client] = False
        try:
            return self._handle(listener, client, addr)
        finally:
            self.connections.pop(client, None)

    def handle_request(self, listener_name, req, sock, addr):
        self.connections[sock] = True
        try:
            result = self._handle_request(listener_name, req, sock, addr)
        finally:
            if sock in self.connections:
                self.connections[sock] = False
        if not self.worker.alive:
            raise StopIteration()       # stopping: end this keep-alive connection now
        return result

    def notify(self):
        self._notify()
        if not self.worker.alive:
            self.stopping()

    def run(self):
        try:
            self._run()
        finally:
            self.close_doors()

    def stopping(self) -> None:
        """The worker stops: close the doors (once), then shut idle connections."""
        self.close_doors()
        for sock, busy in list(self.connections.items()):
            if not busy:
                _shut(sock)

    def close_doors(self) -> None:
        if self.closed:
            return
        self.closed = True
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
