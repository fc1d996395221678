"""The task lifecycle: acceptance, the agent's thread, every transition and its events.

What a running agent calls on its task (progress, frames, artifacts, a question,
a cancel check) is ``tasks/agent_calls.py``'s ``AgentCalls``, the task's port; how
the agent's return or raise ends the task is ``agents.endings.run_agent``'s.

Concurrency:
    Every transition holds the store's lock, changes the record through
    ``store.change_locked`` (which notifies the task's ``runtime.cond``) and
    publishes its events to the ring before releasing the lock, so events
    are numbered in the order the task changed. Agent threads are started,
    and the trace records queued under the lock (``task_start``,
    ``task_end``) are written (``trace.flush()``), after the lock is released. Each wait has a timeout or a wake-up:
    ``runtime.cond`` is notified by every change, by a reply, by cancel and
    by ``close()``.
"""
from __future__ import annotations

import logging
import _thread
import threading
from collections import deque

from murmur_wsgi import logs
from murmur_wsgi.agents.base import TaskContext
from murmur_wsgi.agents.endings import NOT_JSON, Ending, run_agent
from murmur_wsgi.agents.inline import runs_inline
from murmur_wsgi.agents.output import passed_text
from murmur_wsgi.agents.parts import Reply
from murmur_wsgi.door.card import HTTP_FRAMES, PROCESS_FRAMES
from murmur_wsgi.ids import new_id
from murmur_wsgi.door.tasks import frames
from murmur_wsgi.door.tasks.agent_calls import AgentCalls
from murmur_wsgi.door.tasks.record import (CANCELED, COMPLETED, FAILED, INPUT_REQUIRED, REJECTED,
                                      SETTLED, SUBMITTED, WORKING, TaskRecord, now_ms)

logger = logging.getLogger(__name__)

BUSY = "task rejected: capsule is busy"
CLOSING = "task rejected: the session is closing"
NEVER_STARTED = "task rejected: the session ended before this task started"
DOOR_FRAMES = frozenset({"gap", "lagged", "connection-ack", "capsule-closed"})
COMPLETED_TEXT = "task completed"


class Runtime:
    """A live task's moving parts; dropped when the task ends."""

    __slots__ = ("cond", "cancelled", "reply", "start", "forget", "wakers", "interrupted")

    def __init__(self, cond: threading.Condition, start, forget: bool = False):
        self.cond = cond               # on the store's lock; notified by every change
        self.cancelled = False         # guarded by the store's lock
        self.reply: Reply | None = None  # guarded by the store's lock
        self.start = start             # (text, images, data, message, caller): the first call
        self.forget = forget           # the message's forgetSession (TaskContext.forget_session)
        self.wakers: list | None = None  # guarded by the store's lock: TaskContext.on_cancel's
        self.interrupted = False       # guarded by the store's lock: interrupt_ask() called

    def wake(self) -> None:
        """The task is canceled or the session closes: call each waker once (lock held)."""
        wakers, self.wakers = self.wakers, None
        for waker in wakers or ():
            try:
                waker()
            except Exception:  # noqa: BLE001 - one agent's waker must not stop a cancel
                logger.exception("a cancel waker failed")


def _stop_agent_locked(record: TaskRecord) -> None:
    """Tell a live task's agent to stop: its calls raise TaskCanceled, its wakers run."""
    runtime = record.runtime
    if runtime is not None:
        runtime.cancelled = True
        runtime.wake()


class TaskManager:
    """Starts tasks under the manifest's acceptance, and moves them to their end."""

    def __init__(self, session, agent, ring, works):
        self.session = session
        self.store = session.store
        self.ring = ring
        self.works = works
        self.agent = agent
        lifecycle = session.manifest.lifecycle
        self.conversation = lifecycle["conversation"]
        self.acceptance = lifecycle["task_acceptance"]
        self.queue_depth = lifecycle["queue_depth"]
        self.input_timeout = lifecycle["input_timeout_secs"]
        self.max_output = session.manifest.tasks["max_output_bytes"]   # per task (agent_calls)
        self.max_usage_models = session.manifest.tasks["max_usage_models"]  # per task
        self._live: set[str] = set()            # guarded by store.lock: started, not ended
        self._queue: deque[TaskRecord] = deque()  # guarded by store.lock: waiting to start
        self._agents: set[str] = set()            # guarded by store.lock: agents not returned
        self._agents_done = self.store.condition()  # notified as each agent returns
        self.held = 0                             # guarded by store.lock: held SendMessages
        # The frames an agent may write: the card's, less those only the door writes.
        listed = PROCESS_FRAMES if session.manifest.transport == "process" else HTTP_FRAMES
        self.frame_names = frozenset(listed) - DOOR_FRAMES

    # --- the request side -------------------------------------------------

    def submit(self, ctx, context_id: str | None, start, message=None,
               on_accept=None, echoes: tuple = (), hold: bool = False) -> TaskRecord:
        """Accept a new task (or reject it: the record comes back REJECTED, unstored).

        ``message`` (the IncomingMessage, optional) gives the trace's task_start
        its attachments and references, and the agent its forgetSession.
        ``on_accept(record)`` runs under the store's lock right after the task is
        taken and its event published: a caller takes its snapshot there, and a
        stream opens its ring reader there, so nothing is lost or doubled between.
        ``hold``: the caller waits for the task to settle (a held SendMessage);
        when the task starts at once and its agent says the run does not wait
        (its ``inline``, see ``agents/inline.py``), the agent runs here, in the caller's thread.
        """
        record = TaskRecord(new_id("tsk"), context_id or new_id("ctx"), ctx.owner,
                            ctx.trust, ctx.origin)
        record.echoes = echoes             # see render.echo_marks
        to_start = None
        with self.store.lock:
            reason = self._refusal_locked()
            if reason is not None:
                record.state = REJECTED
                record.status_text = reason
                return record
            record.runtime = Runtime(self.store.condition(), start,
                                     forget=bool(message is not None and message.forget_session))
            self.store.add_locked(record)
            # NOTE: under the lock, so task_start precedes every other record of the task.
            self.session.trace.task_start(record, message)
            self.publish_locked(record, frames.recorded_status_later(record))
            if on_accept is not None:
                on_accept(record)
            if self._busy_locked():
                self._queue.append(record)
            else:
                self._live.add(record.id)
                to_start = record
        if to_start is not None:
            if hold and runs_inline(self.agent, start[0]):
                # PERF: the caller would only wait for the task: running the agent here
                # saves a thread's start and two wake-ups (~50 µs under gevent).
                self._run(to_start)
            else:
                self._spawn(to_start)
        self.session.trace.flush()
        return record

    def _busy_locked(self) -> bool:
        """The capsule's slot is taken: a task is live, or an agent has not returned.

        NOTE: a canceled task ends at once, but its agent (and a harness within its
        grace) may run on: the slot is free only once every agent has returned, so
        two agents never run at once.
        """
        return bool(self._live or self._agents)

    def _refusal_locked(self) -> str | None:
        if self.session.closing:
            return CLOSING
        if self.acceptance == "single" and (self._busy_locked() or self._queue):
            return BUSY
        if self.acceptance == "queue" and self._busy_locked() \
                and len(self._queue) >= self.queue_depth:
            return BUSY
        return None

    def deliver_reply(self, record: TaskRecord, text: str, on_accept=None,
                      source: dict | None = None) -> bool:
        """Hand a reply to a task waiting in INPUT_REQUIRED; False if it no longer waits.

        ``text`` is the reply as the agent reads it, ``source`` its ProtoJSON message
        (the agent's ``ctx.ask`` gets both, as a ``Reply``). ``on_accept(record)``
        runs under the store's lock once the task took it.
        """
        reply = Reply.from_wire(source or {"messageId": "", "parts": [{"text": text}]}, text)
        with self.store.lock:
            runtime = record.runtime
            if record.state != INPUT_REQUIRED or runtime is None:
                return False
            runtime.reply = reply
            self.store.change_locked(record, state=WORKING, prompt=None)
            self.publish_locked(record, frames.recorded_status_later(record))
            if on_accept is not None:
                on_accept(record)
            return True

    def cancel(self, record: TaskRecord) -> bool:
        """Move a live task to CANCELED (False when it had already ended)."""
        with self.store.lock:
            if record.terminal:
                return False
            to_start = self._cancel_locked(record)
        if to_start is not None:
            self._spawn(to_start)
        self.session.trace.flush()
        return True

    def _cancel_locked(self, record: TaskRecord):
        _stop_agent_locked(record)
        if record in self._queue:
            self._queue.remove(record)
        residue = [work.residue() for work in self.works.running()]
        self._end_locked(record, CANCELED, None, residue=residue or None)
        return self._next_locked(record)

    def fail_overflowing_locked(self, record: TaskRecord) -> None:
        """The agent wrote past ``tasks.max_output_bytes``: its task ends FAILED, and the
        agent is stopped as a cancel stops it (its calls raise TaskCanceled, a harness is
        ended with SIGTERM); its slot stays taken until it returns."""
        if record.terminal:
            return
        _stop_agent_locked(record)
        self._end_locked(record, FAILED, passed_text("agent", self.max_output,
                                                     "tasks.max_output_bytes"))
        self._live.discard(record.id)
        # NOTE: the sizes only: what the agent wrote is its own, never the log's.
        logger.warning("task %s: the agent wrote more than %d bytes (tasks.max_output_bytes); "
                       "stopped", record.id, self.max_output)

    def stop_all(self) -> list[str]:
        """Cancel every live task (murmur.StopSession); return their ids, sorted."""
        canceled = []
        with self.store.lock:
            for record in list(self._queue) + [self.store.get(t) for t in self._live]:
                if record is not None and not record.terminal:
                    _stop_agent_locked(record)
                    self._end_locked(record, CANCELED, None)
                    canceled.append(record.id)
            self._queue.clear()
            self._live.clear()
        self.session.trace.flush()
        return sorted(canceled)

    def close(self) -> None:
        """The session is closing: queued tasks end rejected, every waiter wakes."""
        with self.store.lock:
            self.session.closing = True
            for record in self._queue:
                if not record.terminal:
                    self._end_locked(record, REJECTED, NEVER_STARTED)
            self._queue.clear()
            for record in [self.store.get(t) for t in self._live]:
                if record is not None and record.runtime is not None:
                    record.runtime.cond.notify_all()
                    record.runtime.wake()
        self.session.trace.flush()

    def wait_settled(self, record: TaskRecord) -> None:
        """Hold until the task settles or the session closes (counted in ``held``)."""
        if record.runtime is None and record.state in SETTLED:
            # PERF: it ended already (an inline run): a terminal task never changes again.
            self.session.trace.flush()
            return
        session = self.session
        with self.store.lock:
            self.held += 1                      # PERF: under a lock the wait takes anyway
            try:
                while not self.store.wait_settled(record, 30.0, wake=lambda: session.closing):
                    if session.closing:
                        return
            finally:
                self.held -= 1
        # NOTE: the answer follows its task's task_end on disk, whichever thread queued it.
        self.session.trace.flush()

    # --- the agent side ---------------------------------------------------

    def _spawn(self, record: TaskRecord) -> None:
        # PERF: the bare thread primitive (a greenlet under gevent): threading.Thread
        # would also build and wait on a start-up Event for every task.
        _thread.start_new_thread(self._run_apart, (record,))

    def _run_apart(self, record: TaskRecord) -> None:
        """``_run`` on a thread of its own, whose records are cut to the door's bound."""
        logs.APP_BOUND.set(self.session.log_field_chars)
        self._run(record)

    def _run(self, record: TaskRecord) -> None:
        with self.store.lock:
            runtime = record.runtime
            if record.state != SUBMITTED or runtime is None:
                return
            text, images, data, message, caller = runtime.start
            runtime.start = None
            forget = runtime.forget
            self.store.change_locked(record, state=WORKING)
            self.publish_locked(record, frames.recorded_status_later(record))
            self._agents.add(record.id)
        session = self.session
        port = AgentCalls(self, record, session.trace, session.delegations, session)
        ctx = TaskContext(port, task_id=record.id, context_id=record.context_id, text=text,
                          images=images, data=data, trust=record.trust, owner=record.owner,
                          conversation=self.conversation, forget_session=forget,
                          message=message, caller=caller)
        ending = run_agent(self.agent, ctx)
        state, status, fields = self._final(record, ending)
        self.end(record, state, status, returned=True, **fields)
        if ending.stopped:
            raise ending.error

    def _final(self, record: TaskRecord, ending: Ending) -> tuple:
        """(state, status text, fields) the door ends a task with, from its agent's ending."""
        state, message, error = ending.state, ending.message, ending.error
        if ending.stopped:
            # NOTE: SystemExit, KeyboardInterrupt, a killed greenlet: the task still ends,
            # so no held request waits on it and the capsule is not busy forever.
            logger.error("agent of task %s was stopped", record.id, exc_info=error)
            return FAILED, "the agent was stopped", {}
        if ending.bad_value:
            logger.error("agent of task %s answered a value that is not JSON: %s",
                         record.id, error)
            return FAILED, NOT_JSON, {}
        if error is not None and state == FAILED and message is None:
            logger.error("agent failed on task %s", record.id, exc_info=error)
            return FAILED, f"the agent failed: {type(error).__name__}", {}
        if state == CANCELED:
            return CANCELED, None, {}
        if state == REJECTED:
            return REJECTED, message or "task rejected", {}
        if state == FAILED:
            return FAILED, message or "the agent failed", {}
        return COMPLETED, message or COMPLETED_TEXT, {"response": ending.answer_text()}

    def agent_running(self, task_id: str) -> bool:
        """True while the agent of ``task_id`` has not returned (introspection)."""
        return task_id in self._agents

    def wait_agent_returned(self, task_id: str, timeout: float) -> bool:
        """Wait until the agent of ``task_id`` has returned; False on timeout."""
        with self.store.lock:
            return self._agents_done.wait_for(lambda: task_id not in self._agents, timeout)

    def end(self, record: TaskRecord, state: str, text: str | None, returned: bool = False,
            **fields) -> None:
        """End a task (once: a task that already ended is left as it is).

        ``returned``: called as its agent returned (one lock for both); the slot
        it held is free now, so a queued task may start even if this one had
        ended before (canceled).
        """
        with self.store.lock:
            if returned:
                self._agents.discard(record.id)
                self._agents_done.notify_all()
            if record.terminal:
                if not returned:
                    return
            else:
                self._end_locked(record, state, text, **fields)
            to_start = self._next_locked(record)
        if to_start is not None:
            self._spawn(to_start)
        self.session.trace.flush()

    def _end_locked(self, record: TaskRecord, state: str, text: str | None, **fields) -> None:
        running = [w.running_command(now_ms()) for w in self.works.running(record.id)]
        # NOTE: before the change, so whoever sees the task ended also finds its task_end.
        self.session.trace.task_end(record, state)
        self.store.change_locked(record, state=state, status_text=text, prompt=None,
                                 running=running or None, **fields)
        runtime, record.runtime = record.runtime, None
        if runtime is not None:
            runtime.cond.notify_all()
            self.session.delegations.drop_locked(record)
        for artifact in record.door_artifacts():
            self.publish_locked(record, frames.artifact_later(record, artifact))
        self.publish_locked(record, frames.recorded_status_later(record), terminal=True)

    def _next_locked(self, record: TaskRecord) -> TaskRecord | None:
        self._live.discard(record.id)
        if self._busy_locked() or not self._queue or self.session.closing:
            return None
        nxt = self._queue.popleft()
        self._live.add(nxt.id)
        return nxt

    def publish_locked(self, record: TaskRecord, payload: str, *, frame: bool = False,
                 terminal: bool = False) -> None:
        # NOTE: every caller holds the store's lock, which the session's ring shares.
        self.ring.publish_locked(record.id, payload, frame=frame, terminal=terminal)
