"""What one worker has read of a task its streams read (``redis_feed``): its newest events.

A task some local stream reads keeps its newest events (at most ``BUFFER_EVENTS``, and
``BUFFER_BYTES`` of payloads) for its readers: a notification wakes them, one reads for
all, and each takes what is new here. The newest is kept whatever its size unless it
passes ``BUFFER_BYTES``: then only while it holds room for it (``EventFeed.room``: the
buffers' large events together within ``limits.worker_answer_bytes``), while a reader
waits on the task (``EventFeed.events``), and in the epoch it was read in.
Every method is called with the feed's lock held.
"""
from __future__ import annotations

import threading

BUFFER_EVENTS = 64              # the newest events a watched task keeps for its readers
BUFFER_BYTES = 256 * 1024      # … and at most this many payload bytes (the newest always)


class Watched:
    """What this worker has read of one task: its newest events, and what was notified.

    Forgotten once no reader asked for ``IDLE_SECS``, or at once when no reader is left
    and its final event is read."""

    __slots__ = ("entries", "first", "last", "notified", "reading", "epoch", "readers",
                 "touched", "size", "more", "cond", "large")

    def __init__(self, epoch: int, lock):
        self.entries: list = []       # StoredEvent, oldest first: positions first..last
        self.first = 1                # the buffer covers a reader that read first - 1
        self.last = -1                # the newest position read (-1: nothing yet)
        self.notified = 0             # the newest position the channel announced
        self.reading = False          # a reader is reading for every one (single flight)
        self.epoch = epoch
        self.readers = 0
        self.touched = 0.0
        self.size = 0
        self.more = False             # the last read was a full page: the log goes on
        self.cond = threading.Condition(lock)   # this task's readers wait here
        self.large = None             # the newest entry, past BUFFER_BYTES, holding room

    def covers(self, after: int, epoch: int) -> bool:
        return self.epoch == epoch and self.last >= 0 and self.first - 1 <= after <= self.last

    def since(self, after: int) -> list:
        return [e for e in self.entries if e.seq > after]

    def merge(self, after: int, entries: list) -> None:
        """Take ``entries`` (every event after ``after``, in order, as just read)."""
        if self.last >= after and self.last >= 0:
            fresh = [e for e in entries if e.seq > self.last]
        else:                                    # nothing contiguous held: start anew
            self.entries, self.size, self.first, fresh = [], 0, after + 1, entries
            self.last = after
        for event in fresh:
            self.entries.append(event)
            self.size += len(event.payload)
            self.last = event.seq
        while len(self.entries) > 1 and (len(self.entries) > BUFFER_EVENTS
                                         or self.size > BUFFER_BYTES):
            dropped = self.entries.pop(0)
            self.size -= len(dropped.payload)
            self.first = dropped.seq + 1

    # --- an event past BUFFER_BYTES -------------------------------------------------

    def kept_within(self, room) -> None:
        """A buffer whose newest event passes ``BUFFER_BYTES`` (then the only one it keeps:
        ``merge``) keeps it while it holds room for it in ``room`` (``LargeReads``; None:
        kept as any other), else none.

        MEMORY: each task its streams read kept its newest event whatever its size, as long
        as a stream waited on it (and a minute after the last): twenty tasks' streams
        waiting after an event of 64 MiB each held 1.3 GB of one worker."""
        newest = self.entries[-1] if self.entries else None
        if self.large is not None and self.large is not newest:
            self.let_go(room)
        if newest is None or self.large is not None or room is None \
                or len(newest.payload) <= BUFFER_BYTES:
            return
        if room.take(len(newest.payload)):
            self.large = newest
        else:
            self.dropped(room)

    def dropped(self, room) -> None:
        """Keep no event, the position only: a reader behind it reads its own way in."""
        self.let_go(room)
        self.entries, self.size, self.first = [], 0, self.last + 1

    def let_go(self, room) -> None:
        """Give back the room the newest event held, if it held some."""
        large, self.large = self.large, None
        if large is not None:
            room.give(len(large.payload))
