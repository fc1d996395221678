"""Large task records read off Redis at once by one worker: bounded in bytes.

A task's record is read whole (GetTask, CancelTask, a SubscribeToTask's opening read), and
on Redis each read is a copy of its own, however large the task. Reads wait on Redis, so
many of them fill at once: twenty GetTasks sent together of one 60 MiB task held 2.3 GB
of one worker for a moment, whatever became of their answers after (``hub/held.py``).
The record is first read by a script that sends it only when its stored forms are small
(``redis_read_scripts.record_script``), else their size; a large one is then read once the
worker has room for it: ``LargeReads.room``. Every large read of the worker together is
at most ``limits.worker_answer_bytes``, one more waits for room (up to
``redis.timeout_secs``, then -32603: ``ReadsBusy``); a worker reading none may always
read one, however large. A tenant's large reads at once are at most its
``limits.answer_bytes`` of that room (one always: a tenant reading none may read one,
within the worker's bound), so that one tenant's reads (pages of its tasks listed without
pause) leave the worker room for the others'. A stream's event larger than a page of its
log is read the same way (``redis_events``); the buffers of the tasks a worker's streams
read keep such events within a room of their own, as large (``take``, which never waits:
``redis_watched``).
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time

from murmur_wsgi.errors import StoreError
from murmur_wsgi.logs import Sparse

logger = logging.getLogger(__name__)

MAX_BYTES = 256 * 1024 ** 2     # limits.worker_answer_bytes' default


class ReadsBusy(StoreError):
    """No room in time for a large record's read: -32603, this message, naming the setting
    that was reached (the worker's, or the tenant's share: ``limits.answer_bytes``)."""

    message = ("Internal error: this worker is reading as many large tasks as it may "
               "(limits.worker_answer_bytes); try again shortly")

    def __init__(self, setting: str = "limits.worker_answer_bytes"):
        super().__init__(self.message.replace("limits.worker_answer_bytes", setting))


class LargeReads:
    """The bytes of large records being read, at most ``max_bytes`` (see the module).

    Concurrency: ``_room`` (a condition on its own lock) guards ``_held``; a reader waits
    on it with a deadline and is woken by each read that ends."""

    def __init__(self, max_bytes: int, wait_secs: float, tenant_bytes=None):
        self.max_bytes = max_bytes
        self._wait = wait_secs
        # ``tenant_bytes(tenant)``: the most a tenant's reads hold at once (None: the worker's)
        self._tenant_bytes = tenant_bytes
        self._room = threading.Condition(threading.RLock())
        self._held = 0
        self._by_tenant: dict[str, int] = {}
        self._logged = Sparse()     # a refusal's line: once a minute per tenant, setting

    @property
    def held(self) -> int:
        with self._room:
            return self._held

    def take(self, size: int) -> bool:
        """Hold ``size`` bytes of room if there is some now (a task's buffer keeping a large
        event, ``redis_watched``); ``give`` them back after. No wait."""
        with self._room:
            if self._held and self._held + size > self.max_bytes:
                return False
            self._held += size
            return True

    def give(self, size: int) -> None:
        """Give back what ``take`` held."""
        with self._room:
            self._held -= size
            self._room.notify_all()

    def _full(self, size: int, tenant: str | None, most: int | None) -> str | None:
        """The setting a read of ``size`` bytes of ``tenant``'s would pass, so must wait for
        (under ``_room``), else None."""
        mine = self._by_tenant.get(tenant, 0)
        if most is not None and mine > 0 and mine + size > most:
            return "limits.answer_bytes"
        if self._held and self._held + size > self.max_bytes:
            return "limits.worker_answer_bytes"
        return None

    @contextlib.contextmanager
    def room(self, size: int, tenant: str | None = None):
        """Hold ``size`` bytes of room (``tenant``'s) while the block reads; raise
        ``ReadsBusy`` when none is free within the wait."""
        deadline = time.monotonic() + self._wait
        most = None if tenant is None or self._tenant_bytes is None \
            else self._tenant_bytes(tenant)
        taken = False
        with self._room:
            while full := self._full(size, tenant, most):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._room.wait(left)
            else:
                self._held += size
                if tenant is not None:
                    self._by_tenant[tenant] = self._by_tenant.get(tenant, 0) + size
                taken = True
        if not taken:                           # no room in time (logged outside the lock)
            # NOTE: a line a minute per tenant and setting, as held answers' (hub/held.py):
            # one tenant's refusals at its share hide no other's.
            left_out = self._logged.due((tenant, full))
            if left_out is not None:
                logger.warning("redis store: a large task's read (%d bytes) of tenant %s "
                               "found no room in %.1f s (%s; %d more since the last line)",
                               size, tenant, self._wait, full, left_out)
            raise ReadsBusy(full)
        try:
            yield
        finally:
            with self._room:
                if tenant is not None:
                    left = self._by_tenant.pop(tenant) - size
                    if left:
                        self._by_tenant[tenant] = left
                self.give(size)
