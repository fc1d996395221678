"""The process groups a worker starts, and how they end when the worker is killed.

Each harness and each background command runs in a session and process group
of its own, so a signal to the group reaches everything it starts. The door
ends them when its session closes; a worker killed outright (SIGKILL, or
gunicorn's timeout) cannot, so two things end them instead:

* **the child itself**: on Linux each is started with ``PR_SET_PDEATHSIG``
  set to SIGKILL, so the kernel kills it when the thread that started it
  ends. That is the worker's main thread under gevent (every greenlet runs
  on it). A process started from another thread (Werkzeug's threaded
  server) does not get it: its thread ends long before the child should.
* **the master**: under gunicorn, ``gunicorn_conf.py`` sets
  ``$MURMUR_WSGI_GROUPS`` to a folder of its own; the worker creates
  ``<folder>/<worker pid>-<pgid>`` for each group it starts and removes it
  once it ended that group; the master's ``child_exit`` hook SIGKILLs every
  group a dead worker left there, so what a leader started in its group
  goes too.

A process that leaves its group (``setsid``, a daemon) is out of reach of both.

Concurrency:
    No shared state but the folder: one file per group, created and removed
    whole (``O_CREAT | O_EXCL``, ``unlink``).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import threading

logger = logging.getLogger(__name__)

GROUPS_ENV = "MURMUR_WSGI_GROUPS"
PR_SET_PDEATHSIG = 1
_prctl: list = []            # [the libc prctl function, or None], loaded on first use


def folder() -> str | None:
    """The folder the worker records its groups in (None: not under gunicorn's conf)."""
    return os.environ.get(GROUPS_ENV) or None


def _load_prctl():
    if not _prctl:
        function = None
        if sys.platform.startswith("linux"):
            try:
                function = ctypes.CDLL(ctypes.util.find_library("c") or None,
                                       use_errno=True).prctl
            except (OSError, AttributeError):
                function = None
        _prctl.append(function)
    return _prctl[0]


def child_setup():
    """A ``preexec_fn`` that makes the child die with this thread, or None.

    None off Linux and off the main thread (see the module's doc). The
    function is loaded here, in the parent: the child only calls it.
    """
    if threading.get_native_id() != os.getpid():
        return None
    prctl = _load_prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def setup() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:             # the parent died before the prctl took
            os.kill(os.getpid(), signal.SIGKILL)

    return setup


def _path(where: str, worker_pid: int, pgid: int) -> str:
    return os.path.join(where, f"{worker_pid}-{pgid}")


def record(pgid: int) -> None:
    """Note a group this worker started (a no-op when not under gunicorn's conf)."""
    where = folder()
    if where is None:
        return
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        os.close(os.open(_path(where, os.getpid(), pgid),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    except OSError as ex:
        logger.warning("cannot record process group %s in %s: %s", pgid, where, ex.strerror)


def forget(pgid: int) -> None:
    """The worker ended group ``pgid``: the master has nothing left to end."""
    where = folder()
    if where is None:
        return
    try:
        os.unlink(_path(where, os.getpid(), pgid))
    except FileNotFoundError:
        pass
    except OSError as ex:
        logger.warning("cannot forget process group %s in %s: %s", pgid, where, ex.strerror)


def end_recorded(where: str, worker_pid: int) -> list[int]:
    """SIGKILL every group ``worker_pid`` recorded in ``where``; return their ids.

    The master calls it once the worker is gone (gunicorn's ``child_exit``), and
    a worker aborting (``worker_abort``) for itself.
    """
    prefix = f"{worker_pid}-"
    try:
        names = [name for name in os.listdir(where) if name.startswith(prefix)]
    except OSError:
        return []
    ended = []
    for name in names:
        pgid = name[len(prefix):]
        if not (pgid.isdigit() and int(pgid) > 1):
            continue
        try:
            os.killpg(int(pgid), signal.SIGKILL)
            ended.append(int(pgid))
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.unlink(os.path.join(where, name))
        except OSError:
            pass
    return ended


def prune(root: str) -> None:
    """Remove the folders of masters that are gone (killed before their ``on_exit``).

    Their records are stale: a group they name may be another's by now, so it
    is left alone, only the record goes.
    """
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            os.kill(int(name), 0)
        except ProcessLookupError:
            remove_folder(os.path.join(root, name))
        except PermissionError:
            pass


def remove_folder(where: str) -> None:
    """The master exits: remove its folder (what is left in it is stale)."""
    try:
        for name in os.listdir(where):
            os.unlink(os.path.join(where, name))
        os.rmdir(where)
    except OSError:
        pass
