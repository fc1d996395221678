"""``create_app()``: the session, its agent, its layers, and the WSGI callable."""
from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import weakref

from murmur_wsgi import logs
from murmur_wsgi.agents import resolve_agent
from murmur_wsgi.door.card import CardCache
from murmur_wsgi.door.dispatch import dispatch
from murmur_wsgi.door.manifest import Manifest, load_manifest, load_manifest_file
from murmur_wsgi.door.metrics import Metrics
from murmur_wsgi.door.middleware.auth import TokenTable
from murmur_wsgi.door.planes.files import FilesPlane, check_root, finished_tasks
from murmur_wsgi.door.session import records
from murmur_wsgi.door.session.core import Session
from murmur_wsgi.keyed_turns import STEP_KEY
from murmur_wsgi.serving.urls import announced_url, is_authority, script_path
from murmur_wsgi.serving.writes import SOCKET_KEY, Body, headers_only

logger = logging.getLogger(__name__)

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}

# Every door of this process not yet closed: what a server closes when it stops
# (the gunicorn conf's worker hooks, ``murmur-wsgi serve --dev``). Weak: a door
# nobody holds is not kept alive by it.
_LIVE: weakref.WeakSet = weakref.WeakSet()


def live_doors() -> list[Door]:
    """The doors of this process that are not closed, oldest first."""
    return sorted(_LIVE, key=lambda door: door.session.started_at)


class _Active:
    """Requests the door is answering, until their body is closed (streams included).

    Concurrency: ``enter``/``leave`` add and discard a token in a set (single
    operations, atomic under the GIL; nothing switches inside them under gevent),
    so a request takes no lock. ``leave()`` takes ``_cond`` only while somebody
    waits in ``wait_idle()``, and then notifies it.
    """

    def __init__(self):
        self._cond = threading.Condition(threading.RLock())
        self._open: set = set()
        self._waiters = 0                       # guarded by _cond: callers in wait_idle()

    @property
    def count(self) -> int:
        """How many requests are being answered now."""
        return len(self._open)

    def enter(self) -> object:
        token = object()
        self._open.add(token)
        return token

    def leave(self, token: object) -> None:
        self._open.discard(token)
        if self._waiters:
            with self._cond:
                self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is being answered; False past ``timeout`` seconds."""
        with self._cond:
            self._waiters += 1
            try:
                return self._cond.wait_for(lambda: not self._open, timeout)
            finally:
                self._waiters -= 1


class Door:
    """The door as a WSGI application. Holds no module globals: embed as many as you like."""

    def __init__(self, manifest: Manifest, agent=None, *, listen: str | None = None,
                 workdir: str | None = None, record: bool | None = None,
                 trace: bool | None = None):
        self.manifest = manifest
        self.workdir = os.path.abspath(workdir if workdir is not None else os.getcwd())
        files = manifest.exports.get("files")
        check_root(files, self.workdir)
        served = os.environ.get(records.RECORD_ENV, "").isdigit()     # by murmur-wsgi serve
        if trace is None:
            # NOTE: a served door traces by default; an embedded one asks.
            trace = served
        self.session = Session(manifest, resolve_agent(manifest, agent), trace=trace)
        self.tokens = TokenTable(manifest.authentication, manifest.name)
        self.cards = CardCache(manifest, self.session.id)
        observability = manifest.observability
        self.log_field_chars = self.session.log_field_chars
        if served:
            # NOTE: the process's one application: its bound holds for every record.
            logs.set_field_chars(self.log_field_chars)
        self.serves_metrics = bool(observability.get("metrics"))
        self.metrics = Metrics(access_log=observability.get("access_log", False),
                               counting=self.serves_metrics)
        self.active = _Active()
        self._write_timeout = manifest.stream["write_timeout_secs"]
        self._write_budget = manifest.stream["pending_bytes"]
        # How the server running this door is asked to stop: set by the gunicorn conf
        # (SIGTERM to the arbiter) and by ``serve --dev``; after_task: exit calls it.
        self.stop_server = None
        self.files_plane = (FilesPlane(files, self.workdir, lambda: finished_tasks(self.session))
                            if files else None)
        self.listen = listen
        public_url = manifest.network.get("public_url")
        self._base_url = announced_url(public_url.rstrip("/")) if public_url else None
        if self._base_url is None and listen:
            host, _, port = listen.rpartition(":")
            host = "localhost" if host in LOOPBACK else host
            self._base_url = f"http://{host}:{port}"
        self.record_path = None
        self._record(record)
        _LIVE.add(self)
        if manifest.lifecycle["after_task"] == "exit":
            self.session.when_first_task_ends(self._after_task_exit)

    def _after_task_exit(self) -> None:
        """``after_task: exit``: the first task has ended; close, then stop the server."""
        logger.info("after_task: exit: the first task has ended; closing the door")
        self.close()
        stop = self.stop_server
        if stop is not None:
            stop()

    def _record(self, record: bool | None) -> None:
        """Write the running record when served by ``murmur-wsgi serve`` (or asked to)."""
        served_by = os.environ.get(records.RECORD_ENV, "")
        if record is None:
            record = served_by.isdigit()
        if not record or not self.listen:
            return
        pid = int(served_by) if served_by.isdigit() else None
        try:
            self.record_path = records.write_record(self, pid, supersede=pid is not None)
        except OSError as ex:
            # NOTE: failing to record never fails a launch; the session is unaddressable by id.
            logger.warning("could not write the running record: %s", ex.strerror)
            return
        atexit.register(records.remove_record, self.session.id)

    def base_url(self, environ: dict) -> str:
        """The card's interface URL: public_url, the listener, or the request's own address
        (the path the door is mounted at percent-encoded; a Host that is not a URL's host,
        the server's name and port instead)."""
        if self._base_url is not None:
            return self._base_url
        host = environ.get("HTTP_HOST", "")
        if not is_authority(host):      # none, or not a URL's (a space, "<"): the server's
            host = f"{environ.get('SERVER_NAME', 'localhost')}:{environ.get('SERVER_PORT', '80')}"
        scheme = environ.get("wsgi.url_scheme", "http")
        mount = script_path(environ.get("SCRIPT_NAME", "").rstrip("/"))
        return f"{scheme}://{host}{mount}"

    def __call__(self, environ, start_response):
        token = self.active.enter()
        bound = logs.APP_BOUND.set(self.log_field_chars)
        # NOTE: no tenant's: a hub mounted beside it marks the greenlet of the connection
        # it served before (``keyed_turns.STEP_KEY``), and its mark stays until cleared.
        STEP_KEY.set(None)
        try:
            body = dispatch(self, environ, start_response)
        except BaseException:
            self.active.leave(token)
            raise
        finally:
            logs.APP_BOUND.reset(bound)
        body = Body(body, functools.partial(self.active.leave, token),
                    sock=environ.get(SOCKET_KEY), timeout=self._write_timeout,
                    budget=self._write_budget)
        if environ.get("REQUEST_METHOD") == "HEAD":
            return headers_only(body, environ.get(SOCKET_KEY), self._write_timeout)
        return body

    def close(self) -> None:
        """Close the session: answer held requests, end streams, kill background work.

        Idempotent. The door goes on answering: a new task is rejected as
        closing, every stream it opens ends at once.
        """
        _LIVE.discard(self)
        self.session.close()
        if self.record_path is not None:
            records.remove_record(self.session.id)
            self.record_path = None


def create_app(manifest, agent=None, *, listen: str | None = None, workdir: str | None = None,
               record: bool | None = None, trace: bool | None = None) -> Door:
    """Build a door from a Manifest, a mapping, or a path to ``murmur.yaml``.

    ``agent`` (a callable taking a TaskContext) serves the tasks instead of
    the manifest's ``agent:``. ``workdir`` (default: the current directory) is
    where ``exports.files.root`` is read from. ``record`` writes the running
    record and ``trace`` the session trace (``<home>/records/<ses>/trace.jsonl``);
    by default the door does both only when ``murmur-wsgi serve`` serves it.
    """
    if isinstance(manifest, str):
        manifest = load_manifest_file(manifest)
    else:
        manifest = load_manifest(manifest)
    return Door(manifest, agent, listen=listen, workdir=workdir, record=record, trace=trace)
