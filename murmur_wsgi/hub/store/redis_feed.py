"""One Redis reader per worker for every open stream: a notification channel, read on demand.

Every script that writes an event of a *marked* task also publishes ``<task id> <n>`` (the
event's position) on one channel: a stream's read marks its task for a while (the store's
``READ`` script) and the store renews the marks of the tasks read here (``reading``), so the
events of a task no stream reads are announced to nobody. ``EventFeed`` listens to that
channel on one connection, in one thread per store, and issues no command of its own. A task
some local stream reads (a *watched* task) keeps the newest events read of it in a small
buffer (``redis_watched``); a notification past the buffer wakes the task's readers, and one
of them (single flight) reads what is new with one read for all. Every read takes at most a
page (``PAGE_EVENTS`` events, and none past the one that brings it to ``PAGE_BYTES``): a
long log (a replay from the start) is read a page at a time, the next page only when a
reader asks past the last, and a full page counts as a notification of the event after it.

So an idle stream costs no Redis command (the listener PINGs every ``block_secs`` it hears
nothing, one command per worker), an event one read per worker that watches its task,
whatever the number of its streams there, and a stream that opens (or falls behind the
buffer) reads its own way in, as before.

Correctness: a reader registers its task before its own read, so an event is either in that
read or notified after it. While the listener is not subscribed (Redis away, or
reconnecting) nothing is taken as covered: each reader reads for itself and waits at most
``block_secs`` between reads. Every (re)subscription starts a new epoch, and a buffer of an
older epoch covers nothing. The other consumers of the channels (``also``, ``observe``) read
nothing for themselves meanwhile: each resubscription after a loss (never the first
subscription) tells them (``resubscribed``), and each looks once for what the gap took. A
read sees every event announced before it began, so a notified position past what it found
was never written (a message no script sent; anyone who can PUBLISH can): it costs one read.

Concurrency:
    One lock guards every watched task; each task's readers wait on a condition
    of their own over it (a notification wakes one of them, its read all), and
    no Redis command is sent while holding it. Every wait has a timeout;
    ``close()`` and every change of epoch wake them all.
"""
from __future__ import annotations

import logging
import threading
import time

import redis

from murmur_wsgi.hub.store.base import retried_quietly
from murmur_wsgi.hub.store.redis_cluster import FAILURES
from murmur_wsgi.hub.store.redis_watched import Watched

logger = logging.getLogger(__name__)

PAGE_EVENTS = 64                # the most events one read of a task's log takes
PAGE_BYTES = 1024 * 1024        # … and none past the one that brings it to this many bytes
IDLE_SECS = 60.0                # a task no reader asked about for this long is forgotten
RECONNECT_SECS = 1.0


class EventFeed:
    """Every local stream's events of the Redis store, through one listener.

    Args:
        client: the store's redis-py client (its ``pubsub()`` gives the connection).
        channel: the channel the scripts publish ``<task id> <n>`` on.
        block_secs: the longest wait between a reader's own reads while unsubscribed,
            and the listener's longest wait for a message (then it PINGs).
        stall_secs: a PING unanswered this long takes the channel for lost (a stalled
            Redis answers nothing and fails nothing).
        lost: called on the listener's thread at each failure of the channel (a cluster
            reads its slot map anew: the listener follows a replica that took over).
    """

    def __init__(self, client, channel: str, block_secs: float = 1.0,
                 stall_secs: float = 5.0, clock=time.monotonic, lost=None):
        self._client = client
        self._lost = lost or (lambda: None)
        self._channel = channel
        self._block = block_secs
        self._stall = stall_secs
        self._clock = clock
        self._lock = threading.RLock()    # NOTE: an RLock under Conditions (docs/architecture.md)
        self._changed = threading.Condition(self._lock)   # the epoch, the close
        self._watched: dict[str, Watched] = {}
        self._epoch = 0                 # odd while subscribed
        self._closed = False
        self._thread: threading.Thread | None = None
        self._others: dict[str, object] = {}       # another channel -> its callback
        self._observer = None                      # told of every event notified
        self._resubscribed: list = []              # told of each subscription after a loss
        self.room = None    # a LargeReads of their own for events past BUFFER_BYTES

    # --- readers -----------------------------------------------------------

    @property
    def subscribed(self) -> bool:
        return self._epoch % 2 == 1

    def watching(self) -> int:
        with self._changed:
            return len(self._watched)

    def events(self, task_id: str, after: int, timeout: float, read) -> tuple[list, bool]:
        """The task's events after position ``after``: at once if some are known, else the
        first that come within ``timeout``; ``(events, exists)`` as ``TaskStore.events``.

        ``read(task_id, after) -> (events, exists, more)`` reads the events after ``after``
        now (a page of them: ``more`` when it stopped at its bound, ``PAGE_EVENTS`` or
        ``PAGE_BYTES``), in one round trip: this reader's own way in, or a read for all the
        task's readers.
        """
        # MEMORY: one frame, not two: every waiting stream waits here, and the frames of a
        # greenlet's deepest call stay resident while it lives (its Python data stack).
        deadline = self._clock() + max(0.0, timeout)
        with self._changed:
            watched = self._watched.get(task_id)
            if watched is None:
                watched = self._watched[task_id] = Watched(self._epoch, self._lock)
            watched.readers += 1
            watched.touched = self._clock()
        try:
            own = True                          # the first look reads unless covered
            while True:
                with self._changed:
                    if self._closed:
                        return [], False
                    epoch, heard = self._epoch, watched.notified
                    if watched.covers(after, epoch) and epoch % 2:
                        stale = watched.notified > watched.last
                        # NOTE: past a full page, a reader with events takes them: the next
                        # page is read by one at the buffer's end (a replay, page by page).
                        if stale and not watched.reading and \
                                not (watched.more and watched.since(after)):
                            watched.reading = True            # read once, for every reader
                            start, own = watched.last, False
                        else:
                            found = watched.since(after)
                            left = deadline - self._clock()
                            if found and (not stale or left <= 0 or watched.more):
                                return found, True
                            if left <= 0:
                                return [], True
                            watched.cond.wait(left)
                            continue
                    else:
                        start = after
                        if not own:                            # unsubscribed: paced reads
                            left = deadline - self._clock()
                            if left <= 0:
                                return [], True
                            watched.cond.wait(min(left, self._block))
                        own = True
                flight = start != after or not own          # this read is for every reader
                try:
                    entries, exists, more = read(task_id, start)
                except BaseException:
                    if flight:
                        with self._lock:
                            watched.reading = False
                            watched.cond.notify_all()
                    raise
                with self._changed:
                    # NOTE: the flight ends with its merge, under one hold of the lock: a reader
                    # between the two would see the task stale still and read it once more.
                    if flight:
                        watched.reading = False
                    # NOTE: only a read begun while subscribed, in the epoch still current, is
                    # known to miss nothing the channel will not announce.
                    if exists and epoch % 2 and epoch == self._epoch:
                        if watched.epoch != epoch:            # taken anew in this epoch
                            watched.let_go(self.room)
                            watched.epoch, watched.last, watched.entries = epoch, -1, []
                            watched.size = 0
                        watched.merge(start, entries)
                        watched.kept_within(self.room)
                        watched.more = more
                        if watched.more:        # the log may go on: as if notified
                            watched.notified = max(watched.notified, watched.last + 1)
                        elif watched.notified == heard > watched.last:
                            # NOTE: this read saw every event announced before it began:
                            # one past its end was never written (a message no script sent).
                            watched.notified = watched.last
                        watched.cond.notify_all()
                    elif flight:
                        watched.cond.notify_all()
                if not exists:
                    return [], False             # the log is gone: for this reader too
                if start == after:
                    if entries:
                        return entries, exists
                    own = False                  # known now: wait for what comes
                    if deadline - self._clock() <= 0:
                        return [], True
        finally:
            with self._changed:
                watched.readers -= 1
                watched.touched = self._clock()
                if not watched.readers and watched.large is not None:
                    watched.dropped(self.room)      # no reader left to share it with

    def reading(self) -> list[str]:
        """The tasks some reader of this feed reads now (the store keeps them watched)."""
        with self._changed:
            return [task_id for task_id, w in self._watched.items() if w.readers]

    def forget(self, task_ids) -> list[str]:
        """Drop what is held of ``task_ids`` (their watch is no longer renewed): a later
        reader reads its own way in, which watches its task again. Those a reader has
        come to meanwhile are kept, and returned."""
        kept = []
        with self._changed:
            for task_id in task_ids:
                watched = self._watched.get(task_id)
                if watched is not None and watched.readers:
                    kept.append(task_id)
                elif watched is not None:
                    del self._watched[task_id]
                    watched.let_go(self.room)
        return kept

    def lapsed(self, task_id: str) -> None:
        """What is held of ``task_id`` covers nothing now (its record is gone, so no end of
        it will be announced): each of its readers reads for itself."""
        with self._changed:
            watched = self._watched.get(task_id)
            if watched is not None:
                watched.let_go(self.room)
                watched.epoch = -1              # no epoch's: covers() is False
                watched.cond.notify_all()

    # --- the listener --------------------------------------------------------

    def also(self, channel: str, callback) -> None:
        """Listen to ``channel`` too, on the same connection: ``callback(data)`` per message
        (called on the listener's thread; it must not block). Before ``start()``."""
        self._others[channel] = callback

    def observe(self, callback) -> None:
        """``callback(task_id, n)`` for every event notified on the channel, whoever reads
        its task (called on the listener's thread; it must not block). Before ``start()``."""
        self._observer = callback

    def resubscribed(self, callback) -> None:
        """``callback()`` each time the listener is subscribed again after it was lost (never
        at its first subscription): what was published meanwhile reached nobody, so the
        consumers of ``also`` and ``observe`` look once for themselves. Called on the
        listener's thread: it must not block, nor send a command (it wakes a thread that
        does). Before ``start()``."""
        self._resubscribed.append(callback)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._listen, name="hub-events", daemon=True)
        self._thread.start()

    def _message(self, message: dict) -> None:
        channel = message.get("channel")
        if channel == self._channel:
            self._notified(message["data"])
            return
        callback = self._others.get(channel)
        if callback is not None:
            try:
                callback(message["data"])
            except Exception:  # noqa: BLE001 - the listener must outlive a callback
                logger.exception("redis store: a callback of %s failed", channel)

    def _notified(self, data: str) -> None:
        task_id, _, position = data.rpartition(" ")
        try:
            n = int(position)
        except ValueError:
            return
        if self._observer is not None:
            try:
                self._observer(task_id, n)
            except Exception:  # noqa: BLE001 - the listener must outlive a callback
                logger.exception("redis store: an observer of the event channel failed")
        with self._changed:
            watched = self._watched.get(task_id)
            if watched is not None and n > watched.notified:
                watched.notified = n
                # NOTE: one reader wakes and reads for all; the others wake on its merge.
                watched.cond.notify(1)

    def _after_gap(self) -> None:
        """Subscribed again after a loss (every channel: one SUBSCRIBE named them all): the
        consumers look for what the gap took."""
        for callback in self._resubscribed:
            try:
                callback()
            except Exception:  # noqa: BLE001 - the listener must outlive a callback
                logger.exception("redis store: a consumer's catch-up after a resubscription "
                                 "failed")

    def _set_epoch(self, subscribed: bool) -> None:
        with self._changed:
            if (self._epoch % 2 == 1) != subscribed:
                self._epoch += 1
                for watched in self._watched.values():
                    # NOTE: what an older epoch announced may be gone (a restart, a
                    # failover): the new epoch's reads and messages tell what is new.
                    watched.notified = 0
                    if watched.large is not None:   # it covers nothing now: let go
                        watched.dropped(self.room)
                self._wake_all()

    def _wake_all(self) -> None:
        """Wake every reader (the lock held): the epoch changed, or the feed closed."""
        for watched in self._watched.values():
            watched.cond.notify_all()

    def _forget_idle(self) -> None:
        now = self._clock()
        with self._changed:
            idle = [k for k, w in self._watched.items() if not w.readers and (
                w.touched < now - IDLE_SECS or (w.entries and w.entries[-1].terminal))]
            for task_id in idle:
                self._watched.pop(task_id).let_go(self.room)

    def _listen(self) -> None:
        failing = False                 # logged once as the channel is lost, once as it is back
        while not self._closed:
            pubsub = None
            try:
                # NOTE: in the try: a cluster that no node answered yet fails here.
                pubsub = self._client.pubsub(ignore_subscribe_messages=False)
                pubsub.subscribe(self._channel, *self._others)
                swept = heard = self._clock()
                pinged = None
                while not self._closed:
                    try:
                        message = pubsub.get_message(timeout=self._block)
                    except UnicodeDecodeError:
                        # NOTE: a message that is not UTF-8 (no hub sends one): redis-py
                        # drops the connection on a reply it cannot decode, and what came
                        # after it; its next read connects and subscribes again (a new
                        # epoch) at once. No failure of Redis: no RECONNECT_SECS pause.
                        logger.warning("redis store: a message on the event channels is "
                                       "not UTF-8; dropped")
                        continue
                    now = self._clock()
                    if message is not None:
                        heard, pinged = now, None
                        kind = message.get("type")
                        if kind == "subscribe" and message.get("channel") == self._channel:
                            # NOTE: a second confirmation is redis-py's own reconnect (its
                            # retry re-subscribes): what was published meanwhile reached
                            # nobody, so the buffers of the epoch before cover nothing.
                            # Not at the first (nothing missed yet; an idle worker: no command).
                            again = self._epoch > 0
                            if failing:
                                logger.warning("redis store: the event channel is back")
                                failing = False
                            self._set_epoch(False)
                            self._set_epoch(True)
                            if again:
                                self._after_gap()
                        elif kind == "message":
                            self._message(message)
                    elif pinged is not None and now - pinged > self._stall:
                        raise redis.TimeoutError("the event channel stalled")
                    elif pinged is None and now - heard >= self._block:
                        # NOTE: a stalled Redis answers nothing and fails nothing: a PING
                        # unanswered within stall_secs takes the channel for lost.
                        pubsub.ping()
                        pinged = now
                    if now - swept >= self._block:
                        swept = now
                        self._forget_idle()
                        if getattr(pubsub.connection, "stale", False):
                            break   # NOTE: another primary (follow_primary): a new epoch
            except (*FAILURES, OSError, ValueError, TypeError, AttributeError) as ex:
                # NOTE: TypeError: hiredis's parser polling a socket close() just dropped;
                # AttributeError: a connect meeting the socket the store's close() dropped.
                self._set_epoch(False)
                if self._closed:
                    break
                logger.log(logging.DEBUG if failing else logging.WARNING, "redis store: the event "
                           "channel failed (%s); reconnecting every %g s", type(ex).__name__,
                           RECONNECT_SECS)
                failing = True
                with retried_quietly():
                    self._lost()
                with self._changed:
                    self._changed.wait_for(lambda: self._closed, RECONNECT_SECS)
            finally:
                self._set_epoch(False)
                try:
                    if pubsub is not None:
                        pubsub.close()
                except FAILURES:
                    pass

    def close(self, wait: float = 0.0) -> None:
        """Wake every reader (each answers ``([], False)``); the listener ends within
        ``block_secs``, waited for up to ``wait`` seconds."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            self._wake_all()
            for watched in self._watched.values():
                watched.let_go(self.room)
        if wait > 0 and self._thread is not None:
            self._thread.join(wait)
