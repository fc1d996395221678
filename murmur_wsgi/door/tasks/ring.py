"""The session's event log: a bounded ring of numbered events, one cursor per reader.

Concurrency:
    ``_lock`` guards the ring. ``_cond`` (on ``_lock``) is notified by
    ``publish()`` and ``close()``; readers wait on it with a timeout (the
    stream's next heartbeat), never poll. A writer never waits for a reader:
    a reader that falls more than its queue behind skips ahead and is told
    how many events it missed (``Lagged``).

Memory:
    A reader takes its events from the ring at most ``take_bytes`` of them at
    a time (one event at least), its replay included: what it has not taken
    stays the ring's, so a slow stream holds at most that (or one larger
    event) beyond the ring.
    Events the ring dropped before the reader took them are missed (``Lagged``).
"""
from __future__ import annotations

import logging
import threading

logger = logging.getLogger(__name__)


class Event:
    """One numbered event: a StreamResponse result, already serialized."""

    __slots__ = ("id", "task_id", "frame", "terminal", "_payload", "size")

    def __init__(self, event_id: int | None, task_id: str | None, payload,
                 frame: bool = False, terminal: bool = False):
        self.id = event_id
        self.task_id = task_id
        self._payload = payload       # JSON text, or a callable that builds it on first read
        self.frame = frame            # a murmur frame: only for readers with the extension
        self.terminal = terminal      # the task's terminal status: a task stream ends after it
        # About the payload's length: what the ring's byte bound counts.
        self.size = len(payload) if isinstance(payload, str) else getattr(payload, "size", 0)

    @property
    def payload(self) -> str:
        """The JSON text of the result: ``{"statusUpdate": …}`` etc."""
        payload = self._payload
        if not isinstance(payload, str):
            # NOTE: two readers may build it at once; both get the same text.
            payload = self._payload = payload()
        return payload

    def __repr__(self):
        return f"<Event {self.id} {self.task_id} {'frame' if self.frame else 'a2a'}>"


class Gap:
    """Replay could not supply every event after the asked id."""

    __slots__ = ("first_available_id",)

    def __init__(self, first_available_id: int):
        self.first_available_id = first_available_id


class Lagged:
    """A slow reader lost ``missed`` events to its bounded queue."""

    __slots__ = ("missed",)

    def __init__(self, missed: int):
        self.missed = missed


class EventRing:
    """The last ``capacity`` events of the session, numbered from 1 across every task.

    Also bounded by their size: past ``max_bytes`` the oldest go (``_shed_locked``).
    """

    def __init__(self, capacity: int = 512, reader_queue: int = 128, lock=None,
                 max_bytes: int = 64 * 1024 ** 2, take_bytes: int = 256 * 1024):
        self.capacity = capacity
        self.max_bytes = max_bytes      # the events held, by their size: the oldest go past it
        self.reader_queue = reader_queue
        self.take_bytes = take_bytes    # a reader's take, by its events' sizes (one at least)
        # NOTE: the session passes the store's RLock: every event is published while the
        # store's lock is held, so publishing re-enters it instead of taking a second lock.
        # PERF: an RLock, since a Condition on a plain Lock checks ownership with a trial
        # acquire, which yields to the hub under gevent.
        self._lock = lock if lock is not None else threading.RLock()
        self._cond = threading.Condition(self._lock)   # notified by publish() and close()
        self._slots: list[Event | None] = [None] * capacity   # guarded by _lock
        self._last_id = 0                                      # guarded by _lock
        self._floor = 1             # guarded by _lock: no event before it is held
        self._bytes = 0             # guarded by _lock: the held events' sizes
        self._closed = False                                   # guarded by _lock
        self.subscribers = 0                                   # guarded by _lock
        self.streams = 0            # guarded by _lock: the subscribers that are streams
        self.published = 0
        self.dropped = 0

    @property
    def last_id(self) -> int:
        return self._last_id

    @property
    def closed(self) -> bool:
        return self._closed

    def _oldest_id(self) -> int:
        return max(self._floor, self._last_id - self.capacity + 1)

    def publish(self, task_id: str | None, payload: str, *, frame: bool = False,
                terminal: bool = False) -> Event:
        """Number and keep an event, waking every reader."""
        with self._lock:
            return self.publish_locked(task_id, payload, frame=frame, terminal=terminal)

    def publish_locked(self, task_id: str | None, payload, *, frame: bool = False,
                       terminal: bool = False) -> Event:
        """``publish()`` for a caller already holding the ring's lock (the store's)."""
        self._last_id += 1
        event = Event(self._last_id, task_id, payload, frame, terminal)
        slot = self._last_id % self.capacity
        replaced = self._slots[slot]
        if replaced is not None:
            self._bytes -= replaced.size
        self._slots[slot] = event
        self._bytes += event.size
        if self._bytes > self.max_bytes:
            self._shed_locked()
        self.published += 1
        self._cond.notify_all()
        return event

    def _shed_locked(self) -> None:
        """Drop the oldest events until the rest fit ``max_bytes`` (the newest always stays).

        A reader behind them is told it lagged, a replay from before them gets a gap:
        as past ``capacity``, large events only make the ring hold fewer.
        """
        oldest = self._oldest_id()
        while self._bytes > self.max_bytes and oldest < self._last_id:
            slot = oldest % self.capacity
            self._bytes -= self._slots[slot].size
            self._slots[slot] = None
            oldest += 1
        self._floor = oldest

    def close(self) -> None:
        """Mark the log closed: every reader wakes and sees ``closed``."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()

    def reader(self, *, task_id: str | None = None, frames: bool = True,
               replay_from: int | None = None, replay: bool = False,
               replay_frames_only: bool = False, stream: bool = True) -> Reader:
        """Open a cursor: live from now, or replaying after ``replay_from`` (0: all held).

        ``stream``: the cursor is a client's stream, counted in ``streams`` from the
        moment it opens to the moment it is released (the door's own watcher is not).

        ``replay_frames_only`` replays murmur frames (and a gap) but no A2A event:
        for a task's stream, whose opening snapshot already says everything its
        older status and artifact events said.
        """
        with self._lock:
            self.subscribers += 1
            self.streams += stream
            reader = Reader(self, task_id, frames, self._last_id, stream)
            if replay:
                self._replay_locked(reader, replay_from or 0, replay_frames_only)
        return reader

    def _replay_locked(self, reader: Reader, after: int, frames_only: bool) -> None:
        """Move the reader's cursor back to its replay's start (a gap first when the ring
        cannot supply every event after ``after``): its next takes read the replay."""
        last = self._last_id
        if last == 0:
            return
        oldest = self._oldest_id()
        if after > last or oldest > after + 1:
            reader._pending = [Gap(oldest)]
            start = oldest
        else:
            start = after + 1
        reader.cursor = start - 1
        reader._replay_to = last
        reader._replay_frames_only = frames_only

    def _release(self, reader: Reader) -> None:
        # NOTE: checked and cleared under the lock: the server's close() and the
        # body's own finally may both release one reader; it counts once.
        with self._lock:
            if reader._open:
                reader._open = False
                self.subscribers -= 1
                self.streams -= reader.stream


class Reader:
    """One connection's cursor into the ring; ``close()`` it when the stream ends."""

    __slots__ = ("_ring", "task_id", "frames", "cursor", "_pending", "_open", "stream",
                 "_replay_to", "_replay_frames_only")

    def __init__(self, ring: EventRing, task_id: str | None, frames: bool, cursor: int,
                 stream: bool = True):
        self._ring = ring
        self.task_id = task_id
        self.frames = frames
        self.stream = stream            # counted in the ring's ``streams``
        self.cursor = cursor            # the last event id this reader has passed
        self._pending: list = []        # a replay's gap, written before its events
        self._open = True               # guarded by the ring's _lock once shared
        # The last id of the replay, which no queue bounds (0: no replay), and whether it
        # brings murmur frames only (a task's stream, whose snapshot says the rest).
        self._replay_to = 0
        self._replay_frames_only = False

    def wants(self, event: Event | None) -> bool:
        return event is not None and (self.task_id is None or event.task_id == self.task_id) \
            and (self.frames or not event.frame)

    def next(self, timeout: float | None) -> tuple[list, bool]:
        """Return (items, closed): new events (with Lagged/Gap markers), waiting up to timeout.

        ``closed`` once the ring is closed and the reader has taken all it holds.
        """
        ring = self._ring
        with ring._lock:
            if self._pending:
                items, self._pending = self._pending, []
                return items + self._collect_locked(), False
            if ring._last_id == self.cursor and not ring._closed and timeout != 0:
                ring._cond.wait(timeout)
            items = self._collect_locked()
            return items, ring._closed and self.cursor == ring._last_id

    def _collect_locked(self) -> list:
        """The events this reader wants since its cursor, through its bounded queue, at most
        ``take_bytes`` of them (one at least): the rest stay the ring's for its next take.

        The queue holds ``reader_queue`` of this reader's own live events (its
        replay is not bounded by it): when more than that are waiting, the oldest
        are dropped and counted in a Lagged. Events the ring no longer holds
        count as missed whatever they were (an upper bound for a reader that
        follows one task).
        """
        ring = self._ring
        last = ring._last_id
        if last == self.cursor:
            return []
        oldest = ring._oldest_id()
        missed = max(0, oldest - self.cursor - 1)
        slots, capacity = ring._slots, ring.capacity
        first = max(self.cursor + 1, oldest)
        if first <= self._replay_to:
            # The replay, alone in its takes as it was written before any live event.
            # PERF: read no further than the take (a slow stream takes a long replay in
            # many), not the rest of the replay at each take.
            only_frames = self._replay_frames_only
            wanted, whole = self._take(
                (event for event_id in range(first, self._replay_to + 1)
                 if self.wants(event := slots[event_id % capacity])
                 and (event.frame or not only_frames)), ring.take_bytes)
            self.cursor = self._replay_to if whole else wanted[-1].id
        else:
            wanted = [event for event_id in range(first, last + 1)
                      if self.wants(event := slots[event_id % capacity])]
            limit = ring.reader_queue
            if len(wanted) > limit:
                missed += len(wanted) - limit
                wanted = wanted[-limit:]
            wanted, whole = self._take(wanted, ring.take_bytes)
            self.cursor = last if whole else wanted[-1].id
        if not missed:
            return wanted
        ring.dropped += missed
        return [Lagged(missed)] + wanted

    @staticmethod
    def _take(events, budget: int) -> tuple[list, bool]:
        """One take of ``events``: those within ``budget`` bytes (one at least), and whether
        they are all of them (an iterator is read no further than the take)."""
        taken: list = []
        size = 0
        for event in events:
            size += event.size
            if size > budget and taken:
                return taken, False
            taken.append(event)
        return taken, True

    @property
    def open(self) -> bool:
        """False once ``close()`` released this cursor."""
        return self._open

    def close(self) -> None:
        """Release the cursor (idempotent, from any thread)."""
        self._ring._release(self)
