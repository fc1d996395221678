"""Waiting on processes: one the test did not start (its pidfd, readable once it exits:
Linux), and servers sent SIGTERM that the test does not wait for (``stopping``)."""
from __future__ import annotations

import os
import select
import subprocess
import threading


def exits_within(pid: int, timeout: float) -> bool:
    """Wait on the process's pidfd, readable once it exits; True when it did (or was gone)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


class Stopping:
    """Servers sent SIGTERM that the test does not wait for: each is waited for on a thread
    of its own (``wait``: up to its timeout, its group SIGKILLed past it, AssertionError),
    and ``check`` (at the end of the session: tests/conftest.py) fails with each failure.

    A server a fixture stops, or a test leaves when nothing after is about its end: the next
    test need not wait the second or so gunicorn takes to stop (its gevent worker's loop
    wakes once a second, then drains). A Redis waits for the servers on it (``join``, by
    its URL) before it is flushed or stopped (tests/redis_util.py, tests/redis_topologies.py):
    a hub still stopping writes to nobody else's data. A test's own Redis can wait so on a
    thread too (``after``: its ``stop_soon``).
    """

    def __init__(self):
        self.threads: list[tuple[threading.Thread, str | None]] = []   # (waiting, its store)
        self.failed: list[str] = []
        self.sent: set = set()          # the processes sent SIGTERM here (once each)
        self._lock = threading.Lock()

    def stop(self, proc: subprocess.Popen, wait, store: str | None = None) -> None:
        """SIGTERM ``proc`` (a server on ``store``, a Redis URL, if any) and return at once; a
        thread calls ``wait()``. Once per process."""
        with self._lock:
            if proc in self.sent:
                return
            self.sent.add(proc)
        if proc.poll() is None:
            proc.terminate()
        self._track(threading.Thread(target=self._wait, args=(wait,), daemon=True), store)

    def after(self, store: str, stop) -> None:
        """``stop()`` (a Redis's, at ``store``) on a thread once every server on ``store``
        sent SIGTERM here ended; return at once. ``check`` waits for it too."""
        def run():
            self.join(store)
            self._wait(stop)
        self._track(threading.Thread(target=run, daemon=True), None)

    def _track(self, thread: threading.Thread, store: str | None) -> None:
        thread.start()
        with self._lock:
            self.threads = [(t, s) for t, s in self.threads if t.is_alive()] + [(thread, store)]

    def _wait(self, wait) -> None:
        try:
            wait()
        except AssertionError as ex:
            with self._lock:
                self.failed.append(str(ex))

    def join(self, store: str | None = None) -> None:
        """Wait until every server sent SIGTERM (on ``store`` only, if given) ended, or was
        killed past its timeout."""
        with self._lock:
            threads = [t for t, s in self.threads if store is None or s == store]
            self.threads = [(t, s) for t, s in self.threads if t not in threads]
        for thread in threads:
            thread.join()

    def check(self) -> None:
        """``join``, then fail with the output of each server that did not stop in time."""
        self.join()
        with self._lock:
            failed, self.failed = self.failed, []
        assert not failed, "\n".join(failed)


stopping = Stopping()
