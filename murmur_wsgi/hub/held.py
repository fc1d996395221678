"""Large answers held for clients still reading them: counted per tenant and per worker.

A large answer the hub makes for one request (a task read off Redis, a task rendered with
``historyLength``, a ListTasks page, the task of a SendMessage sent again) is a copy of its
own, held until its client has read it all. A client that never reads is cut at
``stream.write_timeout_secs``; one that reads a piece just within each deadline holds its
copy as long as it likes, and twenty of them held twenty copies of a 60 MiB task (about
2 GB of one worker's memory, for one tenant's key). ``HeldAnswers`` counts them: a
tenant's clients hold at most ``limits.answer_bytes`` on a worker, every tenant's
together at most ``limits.worker_answer_bytes``, and one more answer past either is
refused (-32603, at once: nothing is held while a client waits).
A tenant, and the worker, holding nothing may always take one, however large: no task is
too large to be read. A kept form the answer quotes (the memory store's wire form of a
finished task, shared by every reader) is not a copy and is not counted.

A SubscribeToTask stream on Redis reads its task's log a page at a time, but an event
larger than a page (an artifact of many MiB) whole: twenty streams stalled in one held
twenty copies. Such an event read off a shared store is held, counted the same way,
while its stream writes it (``event``); past either bound the stream ends with -32603. So
is one the memory store makes for the read (a finished task's long event kept as its
place in the task's wire form, a refused task's Task): a copy too, where the events it
keeps (``TaskStore.kept_event``) are not.
"""
from __future__ import annotations

import logging
import sys
import threading

from murmur_wsgi.errors import InternalError
from murmur_wsgi.logs import Sparse
from murmur_wsgi.wire.raw import RawJSONPieces

logger = logging.getLogger(__name__)

LARGE_CHARS = 256 * 1024        # a larger answer is written in pieces, and counted


class HeldPieces(RawJSONPieces):
    """A held answer's texts; ``done`` gives its bytes back once its client is through."""

    def __new__(cls, texts, done):
        pieces = super().__new__(cls, texts)
        pieces.done = done
        return pieces


class HeldAnswers:
    """The bytes of large answers a worker holds for its clients, per tenant.

    Concurrency: ``_lock`` guards ``_held``, ``_by_tenant`` and ``_events``; a release is
    called once (by the answer's close, the stream's next read or close), from any thread.
    An answer or a stream dropped unclosed (a server that does not call ``close()``) is put
    in ``_dropped`` (``_dropped_events``) by its release's finalizer, which takes no lock
    (it may run within ``_lock``, at any allocation); it is given back under the lock by
    the next count (``_collect``)."""

    def __init__(self, worker_bytes: int):
        self.worker_bytes = worker_bytes
        self._lock = threading.Lock()
        self._held = 0
        self._by_tenant: dict[str, int] = {}
        self._dropped: list[tuple[str, int]] = []      # list.append, list.pop: atomic
        # Streams' events held, by id: [the text, its holders, its tenant, its size].
        self._events: dict[int, list] = {}
        self._dropped_events: list[int] = []            # their releases dropped uncalled
        self._logged = Sparse()                         # a refusal's line: once a minute

    def held(self, tenant: str | None = None) -> int:
        with self._lock:
            self._collect()
            return self._held if tenant is None else self._by_tenant.get(tenant, 0)

    def answer(self, text: str, tenant: str, tenant_bytes: int):
        """``text`` (larger than ``LARGE_CHARS``: its callers answer a smaller one as it is)
        as a result held for ``tenant``: pieces whose ``done`` gives it back, or -32603
        past either bound."""
        size = sys.getsizeof(text)          # its memory: 1 to 4 bytes a character
        with self._lock:
            self._collect()
            over = self._over(tenant, size, tenant_bytes)
        if over is not None:
            self._refuse(tenant, size, over)
        return HeldPieces((text,), _Release(self, tenant, size))

    def event(self, text: str, tenant: str, tenant_bytes: int):
        """A stream's event ``text`` (larger than ``LARGE_CHARS``), read off a shared store
        for the stream: held for ``tenant`` until the returned release is called, or -32603
        past either bound. Streams of one task that hold the same text (the feed's one read
        for all of them) count it once."""
        key = id(text)
        with self._lock:
            self._collect()
            shared = self._events.get(key)
            if shared is not None and shared[0] is text:
                shared[1] += 1
                return _EventRelease(self, key)
            size = sys.getsizeof(text)
            over = self._over(tenant, size, tenant_bytes)
            if over is None:
                self._events[key] = [text, 1, tenant, size]
                return _EventRelease(self, key)
        self._refuse(tenant, size, over)

    def _over(self, tenant: str, size: int, tenant_bytes: int) -> str | None:
        """The setting ``size`` more bytes of ``tenant`` would pass, else None and they are
        counted (under ``_lock``)."""
        mine = self._by_tenant.get(tenant, 0)
        if mine and mine + size > tenant_bytes:
            return "limits.answer_bytes"
        if self._held and self._held + size > self.worker_bytes:
            return "limits.worker_answer_bytes"
        self._held += size
        self._by_tenant[tenant] = mine + size
        return None

    def _refuse(self, tenant: str, size: int, over: str):
        left_out = self._logged.due(tenant)
        if left_out is not None:
            logger.warning("a large answer (%d bytes) of tenant %s refused: %s reached "
                           "(%d more refused since the last line)", size, tenant, over,
                           left_out)
        raise InternalError(f"Internal error: this worker holds as many large answers as "
                            f"it may ({over}) for clients still reading them; try again "
                            f"once they are read")

    def _give_back(self, tenant: str, size: int) -> None:
        with self._lock:
            self._taken_back(tenant, size)

    def _event_given_back(self, key: int) -> None:
        with self._lock:
            self._event_taken_back(key)

    def _event_taken_back(self, key: int) -> None:
        held = self._events[key]
        held[1] -= 1
        if not held[1]:
            del self._events[key]
            self._taken_back(held[2], held[3])

    def _taken_back(self, tenant: str, size: int) -> None:
        self._held -= size
        left = self._by_tenant[tenant] - size
        if left:
            self._by_tenant[tenant] = left
        else:
            del self._by_tenant[tenant]

    def _collect(self) -> None:
        """Give back the answers dropped unclosed (``_Release.__del__``); under ``_lock``."""
        while self._dropped:
            self._taken_back(*self._dropped.pop())
        while self._dropped_events:
            self._event_taken_back(self._dropped_events.pop())


class _Release:
    """Gives a held answer's bytes back, once."""

    __slots__ = ("_answers", "_tenant", "_size")

    def __init__(self, answers: HeldAnswers, tenant: str, size: int):
        self._answers, self._tenant, self._size = answers, tenant, size

    def __call__(self) -> None:
        answers, self._answers = self._answers, None
        if answers is not None:
            answers._give_back(self._tenant, self._size)

    def __del__(self) -> None:
        # NOTE: its answer dropped unclosed: a WSGI server must call close(), and Werkzeug's
        # does not when the client resets the connection once it read the answer while its
        # request's unread bytes were discarded (werkzeug.serving's run_wsgi). No lock here.
        answers, self._answers = self._answers, None
        if answers is not None:
            answers._dropped.append((self._tenant, self._size))


class _EventRelease:
    """Gives a stream's held event back, once (its stream's next read, or its close)."""

    __slots__ = ("_answers", "_key")

    def __init__(self, answers: HeldAnswers, key: int):
        self._answers, self._key = answers, key

    def __call__(self) -> None:
        answers, self._answers = self._answers, None
        if answers is not None:
            answers._event_given_back(self._key)

    def __del__(self) -> None:
        # NOTE: its stream dropped unclosed (as ``_Release.__del__``): no lock here.
        answers, self._answers = self._answers, None
        if answers is not None:
            answers._dropped_events.append(self._key)
