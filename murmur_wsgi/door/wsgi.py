"""The gunicorn target: ``murmur_wsgi.door.wsgi:app``, built from $MURMUR_WSGI_CONFIG.

The door (its session, tokens and locks) is built when this module is
imported. With ``preload_app`` off (``gunicorn_conf.py``) that happens in
the worker, after gevent has patched threading; never import it in the
master, or in a process that forks workers afterwards.

One process serves one session, and its log bound is the process's
(``observability.log_field_chars``). ``gunicorn_conf.py`` refuses more than one
worker; so does this module when gunicorn runs without that conf: each worker
takes an exclusive lock named for its master, and a second one cannot.
"""
from __future__ import annotations

import fcntl
import logging
import os
import sys
import time

from murmur_wsgi.door.app import create_app
from murmur_wsgi import logs, running

# A worker replacing one that is stopping (SIGHUP, a killed worker) waits this long for
# the old one's lock; the door closes within a few seconds of SIGTERM.
TAKEOVER_SECS = 8.0
_held: list[int] = []


def _prune(folder: str) -> None:
    """Remove the lock files of masters that are gone."""
    for name in os.listdir(folder):
        pid = name[len(".worker-of-"):-len(".lock")]
        if name.startswith(".worker-of-") and name.endswith(".lock") and pid.isdigit():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                try:
                    os.unlink(os.path.join(folder, name))
                except FileNotFoundError:
                    pass
            except PermissionError:
                pass


def one_worker(master_pid: int, wait: float = TAKEOVER_SECS) -> int:
    """Take the lock of ``master_pid``'s one worker, or raise RuntimeError."""
    folder = running.running_dir(create=True)
    _prune(folder)
    path = os.path.join(folder, f".worker-of-{master_pid}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise RuntimeError(
                    "murmur-wsgi: another worker of this gunicorn master already serves the "
                    "session, which lives in one process: run gunicorn with one worker "
                    "(-c conf/gunicorn.conf.py does)") from None
            time.sleep(0.1)   # NOTE: only while a stopping worker lets go, at boot


if "gunicorn" in sys.modules:
    try:
        _held.append(one_worker(os.getppid()))
    except OSError as ex:
        # NOTE: no writable home for the lock: the conf's own check still stands.
        logging.getLogger(__name__).warning("cannot take the one-worker lock: %s", ex)

app = create_app(os.environ.get("MURMUR_WSGI_CONFIG", "conf/murmur.yaml"),
                 listen=os.environ.get("MURMUR_WSGI_LISTEN"))
# NOTE: the process's one application, with or without ``murmur-wsgi serve``: its log bound
# holds for every record, the server's own too.
logs.set_field_chars(app.log_field_chars)
