"""One harness process: its process group, its three pipes and the threads that drain them.

Concurrency:
    The task's agent thread owns a ``HarnessProcess`` until the task's outcome is
    known; then a reaper thread of the HarnessAgent takes it over to ``end()`` it,
    which only that thread calls. Four helper threads
    (greenlets under gunicorn's gevent worker) do the blocking I/O so the
    agent thread never blocks without a timeout:

    * the stdout reader puts ``("line", (n, bytes))``, ``("oversized", n)``
      or ``("eof", None)`` on ``events``, a bounded ``queue.Queue``; after
      the end of stdout it waits for the leader to exit and puts
      ``("exit", returncode)``;
    * the stderr drainer keeps the last ``STDERR_TAIL`` bytes and sets
      ``flooded`` once more than the limit arrived, then ``wake()``s; ``flood_line``
      is then the number of stdout lines read so far, which the agent thread acts on
      before the flood (their order between the two pipes is not known otherwise);
    * the stdin writer takes lines from ``_outbox`` (``None`` closes stdin),
      so a harness that stops reading cannot block the door;
    * the exit watcher waits for the leader to exit, then kills its process
      group: a child it left behind holding stdout would otherwise keep the
      end of stdout, and so the ``exit`` event, from coming; it then puts
      ``("exited", returncode)`` (a process outside the group may still hold it).

    ``wake()`` (from any thread, never blocking) puts ``("wake", None)``, so
    the agent thread waits on ``events`` alone, with no polling: a cancel or
    the session closing reaches it through ``TaskContext.on_cancel``.
    ``_stop`` (an Event) tells the reader to give up a full queue. Every
    helper thread ends at EOF or a pipe error, which killing the process
    group brings about.
"""
from __future__ import annotations

import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading

from murmur_wsgi import groups, logs
from murmur_wsgi.wire.encode import compact_ascii

logger = logging.getLogger(__name__)

EVENTS_QUEUED = 16            # stdout lines read ahead of the agent thread
STDERR_TAIL = 4096            # bytes of stderr kept for the server's log
STDERR_CHUNK = 65536
REAP_SECS = 5.0               # how long a SIGKILLed leader may take to be reaped
PUT_RETRY_SECS = 0.2


def resolve_argv(argv: list[str]) -> list[str]:
    """The command to run: ``python``/``python3`` not on PATH mean this interpreter."""
    first = argv[0]
    if first in ("python", "python3") and shutil.which(first) is None:
        return [sys.executable] + list(argv[1:])
    return list(argv)


def exit_text(returncode: int) -> str:
    """``exited with status N`` or ``was killed by SIGNAME``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


class HarnessProcess:
    """A started harness: write lines to it, read its events, end its process group."""

    def __init__(self, argv: list[str], max_line_bytes: int, stderr_limit: int):
        self.argv = resolve_argv(argv)
        self.max_line_bytes = max_line_bytes
        self.stderr_limit = stderr_limit
        # NOTE: its own session and process group: signals reach every process it starts;
        # and it dies with the worker, even one killed outright (groups.py).
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True,
                                     preexec_fn=groups.child_setup())
        self.pid = self.proc.pid
        groups.record(self.pid)
        self.events: queue.Queue = queue.Queue(EVENTS_QUEUED)
        self.flooded = threading.Event()
        self.stderr_bytes = 0                  # written by the drainer only
        self.lines_read = 0                    # written by the stdout reader only
        self.flood_line = 0                    # written by the drainer only, before flooded
        self._tail = b""                       # written by the drainer only
        self._stop = threading.Event()
        self._outbox: queue.Queue = queue.Queue()
        self.troubled = False                  # stdout ended or stderr flooded
        self.on_trouble = None                 # called (helper thread) once troubled
        try:
            for target, name in ((self._read_stdout, "out"), (self._drain_stderr, "err"),
                                 (self._write_stdin, "in"), (self._watch_exit, "exit")):
                threading.Thread(target=logs.carrying_bound(target), daemon=True,
                                 name=f"harness-{self.pid}-{name}").start()
        except BaseException:
            # NOTE: no one else knows this process yet: end it before giving up.
            self.end(0.0, term=False)
            raise

    # --- the agent thread's side ------------------------------------------

    def send(self, message: dict) -> None:
        """Queue one JSON line for the harness's stdin (never blocks)."""
        self._outbox.put((compact_ascii(message) + "\n").encode("ascii"))

    def next_event(self, timeout: float):
        """The next stdout event, or None when none came within ``timeout``."""
        try:
            return self.events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def _trouble(self) -> None:
        """Stdout ended, the harness exited or stderr flooded: wake an agent thread waiting
        elsewhere (an ask)."""
        self.troubled = True
        hook = self.on_trouble
        if hook is not None:
            hook()

    def wake(self) -> None:
        """Wake the agent thread waiting in ``next_event`` (never blocks)."""
        try:
            self.events.put_nowait(("wake", None))
        except queue.Full:
            pass                # events are waiting: the agent thread is awake anyway

    def wait_exit(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` for the leader to exit; its return code, or None."""
        try:
            return self.proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return None

    @property
    def stderr_tail(self) -> str:
        return self._tail.decode("utf-8", "replace")

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the harness's whole process group."""
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def end(self, grace: float, *, term: bool, close_first: bool = False) -> int | None:
        """End the process group; return the leader's return code once reaped.

        Blocks up to ``grace`` + ``REAP_SECS``: the HarnessAgent calls it from a
        reaper thread, never from the task's thread. The group always gets SIGKILL.

        Args:
            grace: seconds the leader has to exit before SIGKILL.
            term: send SIGTERM first (a cancel); otherwise SIGKILL at once,
                unless ``close_first``.
            close_first: close stdin and give the leader ``grace`` to exit by
                itself (after a ``response``).
        """
        if close_first:
            self._outbox.put(None)
            self.wait_exit(grace)
        elif term and self.proc.poll() is None:
            self.signal_group(signal.SIGTERM)
            self.wait_exit(grace)
        # NOTE: always, even when the leader is gone: what it started dies with it.
        self.signal_group(signal.SIGKILL)
        returncode = self.wait_exit(REAP_SECS)
        if returncode is None:
            logger.error("harness %s did not end after SIGKILL", self.pid)
        else:
            groups.forget(self.pid)
        self._stop.set()
        self._outbox.put(None)
        return returncode

    # --- the helper threads -----------------------------------------------

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self.events.put(item, timeout=PUT_RETRY_SECS)
                return True
            except queue.Full:
                continue
        return False

    def _read_stdout(self) -> None:
        # NOTE: a read takes at most sys.maxsize bytes: the largest setting (2^63 - 1) plus
        # the byte that tells a line is too long would raise OverflowError.
        limit = min(self.max_line_bytes, sys.maxsize - 1) + 1
        stdout = self.proc.stdout
        count = 0
        try:
            while True:
                line = stdout.readline(limit)
                if not line:
                    break
                count += 1
                self.lines_read = count
                if len(line) >= limit and not line.endswith(b"\n"):
                    self._put(("oversized", count))
                    self._trouble()
                    return
                if not self._put(("line", (count, line))):
                    return
        except (OSError, ValueError) as ex:
            logger.debug("harness %s stdout: %s", self.pid, ex)
        finally:
            _close(stdout)
        queued = self._put(("eof", None))
        self._trouble()
        if queued:
            # NOTE: the leader may run on after closing its stdout: its exit is an event too.
            # Waited for in slices, and no more once the process is being ended (``end``
            # reaps it, bounded, then sets ``_stop``): no wait here without a timeout.
            code = None
            while code is None and not self._stop.is_set():
                code = self.wait_exit(PUT_RETRY_SECS)
            if code is not None:
                self._put(("exit", code))

    def _watch_exit(self) -> None:
        # NOTE: the group's end closes stdout after all the leader wrote: its lines are
        # still read first, in order, then the end of stdout and the exit. A process that
        # left the group (setsid) may hold stdout open, so that end may never come: the
        # exit is an event of its own too, ``("exited", returncode)``.
        while not self._stop.is_set():
            code = self.wait_exit(PUT_RETRY_SECS)
            if code is not None:
                self.signal_group(signal.SIGKILL)
                # NOTE: told before the event is queued: an ask waits with the lines read
                # ahead filling the queue, and the event would wait behind them for good.
                self._trouble()
                self._put(("exited", code))
                return

    def _drain_stderr(self) -> None:
        stderr = self.proc.stderr
        try:
            while True:
                chunk = stderr.read1(STDERR_CHUNK)
                if not chunk:
                    return
                self.stderr_bytes += len(chunk)
                self._tail = (self._tail + chunk)[-STDERR_TAIL:]
                if self.stderr_bytes > self.stderr_limit and not self.flooded.is_set():
                    self.flood_line = self.lines_read
                    self.flooded.set()
                    self.wake()
                    self._trouble()
        except (OSError, ValueError) as ex:
            logger.debug("harness %s stderr: %s", self.pid, ex)
        finally:
            _close(stderr)

    def _write_stdin(self) -> None:
        stdin = self.proc.stdin
        try:
            while True:
                data = self._outbox.get()
                if data is None:
                    break
                stdin.write(data)
                stdin.flush()
        except (OSError, ValueError) as ex:
            # NOTE: the harness closed its input or ended; its stdout tells the rest.
            logger.debug("harness %s stdin: %s", self.pid, ex)
        _close(stdin)


def _close(pipe) -> None:
    try:
        pipe.close()
    except (OSError, ValueError):
        pass
