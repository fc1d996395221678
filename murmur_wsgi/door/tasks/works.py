"""Background commands (``wrk_…``): detached shell commands the session kills when it ends.

Each runs in its own process group, recorded and started to die with the worker
(``groups.py``), so a worker killed outright leaves none running.

MEMORY: at most ``capabilities.shell.max_running`` run at once (a start counts from its
check until its process has started or failed): a caller whose every message starts one
(the demo's ``/background``) held a process of the host and its entry here per message
until the session ended.

CPU: a command is split (``shlex``) only when it is at most
``capabilities.shell.max_command_bytes`` long: the split takes time growing with the
square of its longest word, on the task's thread (under gevent, the worker's loop): a
command of 1 MB held every other request of the worker for 10 s.
"""
from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time

from murmur_wsgi import groups
from murmur_wsgi.ids import new_id
from murmur_wsgi.wire.encode import utf8_bytes

logger = logging.getLogger(__name__)

COMMAND_SHOWN = 200


class CommandRefused(Exception):
    """The command's binary is not in capabilities.shell.allow, max_running are running
    already, or it cannot be started."""


class Work:
    __slots__ = ("id", "binary", "path", "command", "started_ms", "task_id", "proc")

    def __init__(self, work_id, binary, path, command, task_id, proc):
        self.id = work_id
        self.binary = binary
        self.path = path
        self.command = command
        self.started_ms = time.time_ns() // 1_000_000
        self.task_id = task_id
        self.proc = proc

    def running(self) -> bool:
        return self.proc.poll() is None

    def residue(self) -> dict:
        """A residue item: a detached_shell the session leaves running."""
        return {"kind": "detached_shell", "work_id": self.id, "binary": self.binary,
                "command": self.command, "started_at_ms": self.started_ms}

    def running_command(self, ended_ms: int) -> dict:
        """A metadata.murmur.runningCommands entry for the task that started it."""
        command = self.command if len(self.command) <= COMMAND_SHOWN else \
            self.command[:COMMAND_SHOWN] + "…"
        return {"workId": self.id, "binary": self.path, "command": command,
                "runningMs": max(0, ended_ms - self.started_ms)}


class BackgroundWorks:
    """Every background command of the session, oldest first."""

    def __init__(self, allow: list[str], max_running: int = 16,
                 max_command_bytes: int = 64 * 1024):
        self._allow = set(allow)
        self._max_running = max_running
        self._max_command_bytes = max_command_bytes
        self._lock = threading.Lock()
        self._works: list[Work] = []          # guarded by _lock
        self._starting = 0                    # guarded by _lock: checked, not yet started
        self._closed = False                  # guarded by _lock: kill_all() ran

    def start(self, command: str, task_id: str | None) -> Work:
        """Start ``command`` in its own process group, detached from the request."""
        if utf8_bytes(command) > self._max_command_bytes:
            raise CommandRefused(f"the command is longer than {self._max_command_bytes} bytes "
                                 "(capabilities.shell.max_command_bytes)")
        try:
            argv = shlex.split(command)
        except ValueError as ex:
            raise CommandRefused(f"cannot parse the command: {ex}") from None
        if not argv:
            raise CommandRefused("the command is empty")
        if "\0" in command:            # no argument of a process can hold one
            raise CommandRefused("the command holds a NUL character")
        binary = argv[0]
        # NOTE: a bare name, looked up on PATH: "/tmp/x/sleep" must not pass for "sleep".
        if "/" in binary or binary not in self._allow:
            raise CommandRefused(f"{binary} is not in capabilities.shell.allow")
        path = shutil.which(binary)
        if path is None:
            raise CommandRefused(f"{binary} is not installed")
        with self._lock:
            ended = self._prune_locked()
            full = len(self._works) + self._starting >= self._max_running
            closed = self._closed
            if not (full or closed):
                self._starting += 1
        _forget(ended)
        if closed:
            raise CommandRefused("the session is closing")
        if full:
            raise CommandRefused(f"{self._max_running} commands are running already "
                                 "(capabilities.shell.max_running)")
        try:
            proc = subprocess.Popen([path] + argv[1:], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True, preexec_fn=groups.child_setup())
        except BaseException as ex:
            # NOTE: whatever Popen raised, the place is given back; kept, each such command
            # took one for good.
            with self._lock:
                self._starting -= 1
            if isinstance(ex, OSError):
                raise CommandRefused(f"{binary} could not start: {ex.strerror}") from None
            raise
        groups.record(proc.pid)
        work = Work(new_id("wrk"), binary, path, command, task_id, proc)
        with self._lock:
            self._starting -= 1         # NOTE: with the append: the count never dips
            closed = self._closed
            if not closed:
                self._works.append(work)
        if closed:
            # NOTE: kill_all() ran while it started: it would outlive the session.
            _kill(work)
            raise CommandRefused("the session is closing")
        return work

    def running(self, task_id: str | None = None) -> list[Work]:
        """The works still running (of one task, or all), oldest first."""
        if not self._works:
            return []       # PERF: one read, no lock: every task end asks, most sessions start none
        with self._lock:
            ended = self._prune_locked()
            alive = self._works
        _forget(ended)
        return [w for w in alive if task_id is None or w.task_id == task_id]

    def _prune_locked(self) -> list[Work]:
        """Keep the works still running; return those that ended."""
        alive, ended = [], []
        for work in self._works:
            (alive if work.running() else ended).append(work)
        self._works = alive
        return ended

    def kill_all(self) -> None:
        """End every work's process group: the session is ending (no work starts after)."""
        with self._lock:
            self._closed = True
        for work in self.running():
            _kill(work)


def _forget(ended: list[Work]) -> None:
    for work in ended:
        groups.forget(work.proc.pid)


def _kill(work: Work) -> None:
    try:
        os.killpg(work.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        work.proc.wait(timeout=5)
        groups.forget(work.proc.pid)
    except subprocess.TimeoutExpired:
        logger.warning("background command %s did not end", work.id)
