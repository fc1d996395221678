"""Runs: a hosted agent working on one task, from admission to its one final state.

A run's agent works on its own thread (a greenlet under gevent). What it
streams goes two ways: to the run's own SendStreamingMessage (``live``, a
backlog bounded in bytes, hub/live.py), and merged (at most one stored event
every ``events.merge_secs``) to the store's event log, which SubscribeToTask
replays. The run keeps its streamed text merged (one string per stored event),
not one object per token, and its agent's thread gives way to the others every
10 ms of writes (murmur_wsgi/turns.py): the agent's side, ``RunWrites``, is hub/run_writes.py.
What the agent writes (its text, progress, artifacts, the models its usage names) is
counted: past ``limits.max_output_bytes`` the task ends FAILED and
the agent is stopped, as at the run timeout (the run and its task's event log hold it all
until the end). The run ends once:
COMPLETED with its answer and usage part, FAILED (the agent failed, the run
timeout, the drain's "interrupted"), CANCELED (CancelTask, the client left)
or REJECTED; whatever comes after the first end is dropped. An event the
store refuses (Redis away) is kept and written later, in order
(``run_events.py``), never raised into the agent.

Concurrency:
    Each run has its own lock (an RLock), ``lock``, which guards its fields, and a
    condition on it, ``changed``: notified by every live event, stop request and end of
    that run, it wakes its own stream, its held SendMessage requests, CancelTask and its
    agent in ``ctx.wait``. The condition is made by its first waiter, under the lock
    (PERF: a run nobody waits on, a blocking SendMessage's run that ends inline, makes
    none and notifies none), so a change made under the lock before it existed is seen
    by that waiter's predicate, read under the lock after. The store's round trips a
    run makes under its lock (its events) hold no other run: with one lock for all of a
    worker's runs, held through a store's round trip, their ends went one at a time
    (docs/performance.md). Its end is decided under the lock (``ending``: what the agent
    writes after is dropped) and written without it: a store that stalls holds no
    CancelTask waiting on the run past its timeout.
    ``Runs.lock`` (hub/run_registry.py) guards the registry (the runs in flight, the
    overdue ones, the unwritten ends); ``Runs.changed``, on it, is notified when a run
    leaves. Lock order: a run's lock, then ``Runs.lock``, then the store's.
    Timers (the run timeout, the merge flush) are ``Runs.timer``'s (timers.py:
    one thread for every run's), cancelled when the run ends; a run in its caller's
    thread (``start``'s ``inline``) arms its timeout only once its agent gives way.
"""
from __future__ import annotations

import _thread
import logging
import threading
import time

from murmur_wsgi.agents.output import OutputCount
from murmur_wsgi.agents.usage import RunUsage
from murmur_wsgi.hub.context import HubContext
from murmur_wsgi.hub.live import LiveBacklog
from murmur_wsgi.hub.run_end import execute, final_write
from murmur_wsgi.hub.run_events import KeptEvents
from murmur_wsgi.hub.run_writes import RunWrites
from murmur_wsgi.hub.store import StoreError
from murmur_wsgi.hub.task import COMPLETED, FAILED
from murmur_wsgi.keyed_turns import STEP_KEY

logger = logging.getLogger(__name__)

INTERRUPTED = "interrupted: the hub shut down before the run ended"


class Run(RunWrites):
    """One task's run. Fields are guarded by its own lock (``lock``)."""

    def __init__(self, runs, task, agent, limits: dict, live: int | None):   # run_registry.Runs
        self.runs = runs
        # NOTE: this run's own lock and condition: what it changes wakes only those waiting
        # on it (its senders, its stream, CancelTask, its agent), and a store's round trip
        # made under it (an event written) holds no other run.
        self.lock = threading.RLock()
        self._changed = None         # its Condition on ``lock``, once a waiter made it
        self.task_id = task.id
        self.context_id = task.context_id
        self.tenant = task.tenant
        self.agent_name = task.agent
        self.agent = agent
        self.timeout = limits["run_timeout_secs"]
        self.max_models = limits["max_usage_models"]
        # The bytes of output the agent wrote, against its bound (run_end.count_output).
        self.output = OutputCount(limits["max_output_bytes"])
        # The run's own stream, ``live`` bytes at most behind; None: no stream reads it.
        self.live = None if live is None else LiveBacklog(live, self._live_text,
                                                          self._live_state, task.id)
        self.ended = False           # the task has its final state
        self.ending = False          # its end is decided (being written, or ``ended``):
                                     # what the agent writes after it is dropped
        self.returned = False        # the agent's call returned (or raised)
        self.stopping = False        # the agent should stop (cancel, timeout, drain)
        self.cancel_requested = False
        self.store_failed = False    # the final write failed (Runs.unwritten retries it), or
                                     # no final event found: the answer is the store's error
        self.slot_released = False   # the tenant's admission slot was given back
        self.keep_answer = False     # a held SendMessage answers with the finished task
        self.final_json = None       # its JSON, when the store's end returned it
        self.overdue = False         # ended while the agent executes: it holds a slot still
        self.tokens: list = []       # the streamed text, merged (_flush_locked, run_text.py)
        self.stored = 0              # entries of tokens already in the store's log
        self.stored_any = False
        self._loose = 0              # the newest tokens, not joined yet (all unstored)
        self._turn_ends = 0.0        # the agent's thread's own (murmur_wsgi/turns.py)
        self._untimed_since = None   # an inline run's start, until it arms its run timeout
        self.last_flush = 0.0
        self.kept = KeptEvents(self.task_id)   # the events the store refused, in order
        self.usage: RunUsage | None = None   # made by the first report (PERF: most make none)
        # The agent's named artifacts as they stand, by id, in the order they stand (one
        # replaced goes last). PERF: found by id, not searched: n names cost n, not n^2 / 2.
        self.artifacts: dict[str, dict] = {}
        self._wakers: list = []
        self._timeout = None         # the run timeout's timers.Timer
        self._flush_timer = None

    @property
    def changed(self) -> threading.Condition:
        """The run's condition, on its lock: made by the first to wait on it."""
        changed = self._changed
        if changed is None:
            with self.lock:
                if self._changed is None:
                    self._changed = threading.Condition(self.lock)
                changed = self._changed
        return changed

    def _notify_locked(self) -> None:
        """Wake whoever waits on the run (its lock held); with no condition, nobody does."""
        if self._changed is not None:
            self._changed.notify_all()

    # --- ending ----------------------------------------------------------------

    def finish(self, state: str, text: str | None = None, *, answer: str | None = None,
               data=None, status_message: str | None = None, returned: bool = False) -> bool:
        """End the task ``state``; False when it had ended already (nothing changes).

        ``returned``: the agent's call is over (its ending, ``run_end.execute``): marked so
        first, under the same lock (PERF: not a lock of its own, about 10 K instructions),
        unless the run is overdue: ``_agent_returned`` gives its slot back after."""
        runs = self.runs
        lock = self.lock
        lock.acquire()
        try:
            if returned and not self.overdue:
                self.returned = True
            if self.ending:
                return False
            if self.stored < len(self.tokens):      # PERF: no call when nothing is unstored
                self._flush_locked()
                if self.ended:
                    return False        # the flush found the task ended elsewhere
            events, artifacts, encoded = final_write(self, state, answer, data)
            if state == COMPLETED:
                text = status_message
            # NOTE: the tenant's slot is free before the end is visible (or with it: shared
            # counters whose store's end frees it): a client that sends again as soon as it
            # reads the final state is not refused for this run.
            self._release_slot_locked(by_end=True)
            kept = self.kept.take()
            # NOTE: none kept, the number the run's next event would have had: every one
            # before it was written (a store that lacks some lost them: redis_scripts).
            numbered = (self.kept.next, 0)
            if kept:            # PERF: most runs have none: no list made, no list joined
                # The events the store refused first, in order, numbered from ``first``.
                events = [payload for _, payload in kept] + events
                numbered = (kept[0][0], len(kept))
            self.ending = True
            # NOTE: a shared store's end (Redis) is written without the run's lock: one that
            # stalls holds no CancelTask past its timeout, and no stop request, on this run
            # (those wait on it). PERF: an in-process store's cannot stall: written under
            # it, taken once (a lock taken costs about 10 K instructions under gevent).
            unlocked = runs.store.shared
            if unlocked:
                lock.release()
            try:
                written, final_json, elsewhere = self._write_end(
                    (self.task_id, state, text, artifacts, events, numbered, encoded), len(kept))
            except BaseException:
                # NOTE: the write's, or the read of the end written elsewhere (a greenlet
                # killed, a gevent.Timeout): the lock is taken back before ``finally``
                # releases it, and the end is not left decided: the caller may end it.
                if unlocked:
                    lock.acquire()
                self.ending = False
                raise
            if unlocked:
                lock.acquire()
            self.final_json = final_json
            self._close_locked(written)
        finally:
            lock.release()
        runs.ended(self)
        return not elsewhere

    def _write_end(self, args: tuple, kept: int) -> tuple:
        """Write the end ``args`` (``store.end``'s): ``(written, final_json, elsewhere)``,
        the events this run wrote but its ``kept`` first (the run's own stream has those)
        and the task's wire form; none, for an end the store refused (queued for the
        replica's retry); the final event another writer wrote first (``elsewhere``)."""
        runs = self.runs
        try:
            written = runs.store.end(*args, keep=self.keep_answer)
        except StoreError:
            # NOTE: the task stays in the store as it was; its end is written once the store
            # answers again (Runs.retry_unwritten), or the sweep ends it.
            logger.warning("task %s: its end could not be written; retrying", self.task_id)
            with runs.lock:
                runs.unwritten.append(args)
            self.store_failed = True
            return [], None, False
        if written is None:
            return self._final_written_elsewhere(), None, True
        return written[kept:], getattr(written, "wire", None), False

    def release_slot(self, by_end: bool = False) -> None:
        """Give the tenant's admission slot back, once; a run whose agent still executes
        (its task ended at its timeout or by the drain) keeps one, as overdue, until the
        agent returns: ``limits.concurrency`` bounds what executes. ``by_end``: the task's
        end is written next, which frees the slot itself on shared counters (``ends_free``)."""
        if self.slot_released:
            return              # PERF: once True it stays so: read without the lock first
        with self.lock:
            self._release_slot_locked(by_end)

    def _release_slot_locked(self, by_end: bool) -> None:
        """``release_slot`` with the run's lock held (PERF: ``finish`` holds it already: a
        reentrant acquire costs about 5 K instructions under gevent)."""
        if self.slot_released:
            return
        self.slot_released = True
        runs = self.runs
        try:
            if not self.returned:
                runs.became_overdue(self)
                self.overdue = True
            if not (by_end and runs.admission.counters.ends_free):
                runs.admission.release(self.tenant, self.task_id)
        except StoreError:
            pass        # a shared store frees the slot with the task's end, or its lease

    def _agent_returned(self) -> None:
        """The agent's call returned (or raised): an overdue run gives its slot back now."""
        runs = self.runs
        with self.lock:
            self.returned = True
            if self.overdue:
                self.overdue = False
                runs.no_longer_overdue(self)
            self._notify_locked()

    def ended_elsewhere(self) -> None:
        """Another replica wrote the task's end (its sweep took this one for dead): the run
        is over here too, and its own stream ends with that end. Its slot went with that
        end: a replica taken for dead holds none, its agent executing or not."""
        with self.lock:
            if self.ending:
                return          # its own end is being written: it meets the other there
            self._closed_elsewhere_locked()
        self.runs.ended(self)

    def _close_locked(self, written: list | None) -> None:
        """The task has its one end: stop the agent and the timers, end the run's own stream
        with ``written`` (the events this run wrote), or with the final event another
        replica wrote (None: read from the task's event log)."""
        self.ended = self.ending = True
        self._stop_locked()
        if self._timeout is not None:
            self._timeout.cancel()
        if self._flush_timer is not None:
            self._flush_timer.cancel()
        if written is None:
            # NOTE: a blocking run's too: with no final event found, it answers the store's
            # error (hub/methods/messages.py), not the task as it was accepted.
            written = self._final_written_elsewhere()
        if self.live is not None:
            # NOTE: the live stream has every token (or, lagged, the text they make): its
            # last chunk is relative to them.
            self.live.end(written)
        self._notify_locked()
        self._signal_closed()

    def _final_written_elsewhere(self) -> list[str]:
        """The final event another writer wrote; none, and ``store_failed``, when the store
        cannot be read or holds none: the task went with its log (a Redis flushed, or
        restarted empty), and the run's answer is the store's error."""
        try:
            final = self.runs.store.final_event(self.task_id)
        except StoreError:
            final = None
        if final is None:
            self.store_failed = True            # the stream ends with the store's error
            return []
        return [final]

    def _appended(self, payload: str) -> None:
        """Store a non-final event behind those kept (``KeptEvents``: a failing store never
        raises into the agent); a task another replica ended closes the run here."""
        if not self.ending and self.kept.add(payload):
            self._store_kept_locked()

    def store_kept(self) -> None:
        """Write the events the store refused, oldest first (the replica's turn)."""
        with self.lock:
            self._store_kept_locked()

    def _store_kept_locked(self) -> None:
        if not self.ending and not self.kept.write(self.runs.store):
            self._closed_elsewhere_locked()
            self.runs.ended(self)
        started, self.kept.started = self.kept.started, None
        if started is not None:
            self._live(started)                 # the start, stored late

    def _closed_elsewhere_locked(self) -> None:
        self.kept.take()
        if self.runs.store.shared:
            self.slot_released = True   # the end another replica wrote freed the slot
        self._close_locked(None)

    def request_stop(self, cancel: bool, timeout: float = -1) -> bool:
        """Stop the run (``cancel``: a CancelTask's, its end CANCELED); True once stopped.

        ``timeout``: at most that long for the run's lock, which an agent's write holds
        through its store's round trip (a stall: up to ``redis.timeout_secs``). Past it,
        False, and a thread of its own stops the run once the lock is free."""
        if not self.lock.acquire(timeout=timeout):
            _thread.start_new_thread(self.request_stop, (cancel,))
            return False
        try:
            if cancel and not self.ending:
                self.cancel_requested = True
            self._stop_locked()
            self._notify_locked()
        finally:
            self.lock.release()
        return True

    def _stop_locked(self) -> None:
        self.stopping = True
        wakers, self._wakers = self._wakers, []
        for waker in wakers:
            try:
                waker()
            except Exception:  # noqa: BLE001 - an agent's waker must not stop the others
                logger.exception("task %s: a stop waker failed", self.task_id)

    def _timed_out(self) -> None:
        # NOTE: ended first, then stopped: stopped first, the agent's next write was refused
        # and its thread could end the task CANCELED before this FAILED it (seen under load).
        try:
            ended = self.finish(FAILED, f"the run took longer than {self.timeout:g} s and "
                                        "was stopped")
        finally:
            self.request_stop(cancel=False)     # whatever the end met: the agent stops
        if ended:
            logger.info("task %s: run timeout (%g s)", self.task_id, self.timeout)

    # --- the thread -----------------------------------------------------------

    def start(self, ctx: HubContext, started: str | None = None, inline: bool = False) -> None:
        """Run the agent on a thread of its own; ``started``: the task's WORKING statusUpdate,
        stored already (``TaskStore.open``), else the thread stores the start first.

        ``inline``: the agent says this run does not wait (``agents/inline.py``) and the
        caller would only wait for the end (a blocking SendMessage): the agent runs here,
        in the caller's thread, and the run has ended when this returns.
        PERF: about 9 % of a blocking SendMessage's instructions: a thread's start and the
        wake-ups of two (docs/performance.md)."""
        if inline:
            # PERF: no run timeout yet (a timer armed and cancelled: about 30 K
            # instructions). The agent does not wait: under gevent no timer can fire until
            # it gives way, after 10 ms of writes (``_turn``), which arms it then.
            self._untimed_since = time.monotonic()
            execute(self, ctx, started)     # a stopped agent is logged (end_as), not raised
            return
        self._arm_timeout(self.timeout)
        _thread.start_new_thread(self._work, (ctx, started))

    def _arm_timeout(self, seconds: float) -> None:
        """The run timeout, due in ``seconds``.

        PERF: armed without the run's lock (a lock taken costs about 10 K instructions
        under gevent). The timer is set, then ``ended`` read; an end (``_close_locked``)
        sets ``ended``, then reads the timer: one of the two sees the other's write, so an
        end that comes meanwhile (a CancelTask on another thread) cancels it, or this does.
        """
        timer = self._timeout = self.runs.timer(max(seconds, 0.0), self._timed_out)
        if self.ended:
            timer.cancel()

    def _work(self, ctx: HubContext, payload: str | None) -> None:
        STEP_KEY.set(self.tenant)       # the agent's writes take turns with its tenant's steps
        try:
            ending = execute(self, ctx, payload)
        except Exception:  # noqa: BLE001 - a run's thread ends logged, never unhandled
            # NOTE: e.g. the hub closing under an overdue run's last call (redis-py raises
            # AttributeError when its pool is disconnected under a command).
            logger.exception("task %s: the run's thread failed", self.task_id)
            return
        if ending.stopped:
            raise ending.error              # the agent's thread ends as it was ended
