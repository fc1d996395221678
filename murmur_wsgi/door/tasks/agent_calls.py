"""The door's side of a running agent's calls: one task's ``AgentPort``.

``AgentCalls`` is what a task's ``TaskContext`` calls (cancel checks, progress,
frames, artifacts, usage, a question to the client, delegations, a background
command, trace records). ``TaskManager._run`` builds one per task, passing
what the door knows explicitly: its manager (whose ``store`` lock guards every
change, ``works``, ``frame_names``, ``input_timeout``, ``max_output`` and
``publish_locked``), the task's record, the session's trace and delegations. Each
call made after the task's cancel (or end) raises ``TaskCanceled``. What the agent
writes (its progress, frames, artifacts and the models its usage names) is counted
(``_within_locked``): past ``tasks.max_output_bytes`` its task ends FAILED and the
agent is stopped.
"""
from __future__ import annotations

import logging

from murmur_wsgi.agents.endings import TaskCanceled, TaskFailed
from murmur_wsgi.agents.output import OutputCount
from murmur_wsgi.agents.owned import own_fields
from murmur_wsgi.agents.parts import Reply
from murmur_wsgi.agents.port import AgentPort, AskInterrupted
from murmur_wsgi.turns import turn
from murmur_wsgi.agents.usage import RunUsage
from murmur_wsgi.door.tasks import frames
from murmur_wsgi.door.tasks.record import INPUT_REQUIRED, TaskRecord
from murmur_wsgi.door.tasks.works import CommandRefused
from murmur_wsgi.wire.encode import utf8_bytes

logger = logging.getLogger(__name__)


class AgentCalls(AgentPort):
    """The calls of one running agent on its task."""

    def __init__(self, manager, record: TaskRecord, trace, delegations, session):
        self.manager = manager          # tasks.manager.TaskManager
        self.store = manager.store
        self.record = record
        self.trace = trace              # session.trace.Trace
        self.delegations = delegations  # session.delegations.Delegations
        self.session = session          # read for ``closing`` only
        # guarded by the store's lock: what the agent wrote, in bytes (agents/output.py)
        self.output = OutputCount(manager.max_output)
        self._turn_ends = 0.0           # the agent's thread's own (murmur_wsgi/turns.py)

    # --- cancellation -----------------------------------------------------

    def cancelled(self) -> bool:
        runtime = self.record.runtime
        return runtime is None or runtime.cancelled

    def on_cancel(self, waker) -> None:
        """Call ``waker()`` once the task is canceled or the session closes (now if so)."""
        with self.store.lock:
            runtime = self.record.runtime
            if runtime is not None and not runtime.cancelled and not self.session.closing:
                if runtime.wakers is None:
                    runtime.wakers = []
                runtime.wakers.append(waker)
                return
        waker()

    def wait(self, seconds: float) -> bool:
        with self.store.lock:
            runtime = self.record.runtime
            if runtime is None:
                return True
            session = self.session
            return runtime.cond.wait_for(lambda: runtime.cancelled or session.closing, seconds)

    # --- reporting --------------------------------------------------------

    def progress(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"progress: text must be a string, not {type(text).__name__}")
        record = self.record
        with self.store.lock:
            if self.cancelled():
                raise TaskCanceled(record.id)
            event = frames.status_later(record, text)
            published = self._within_locked(event.size)
            if published:
                self.manager.publish_locked(record, event)
        self._written(published)

    def frame(self, name: str, text: str, fields: dict) -> None:
        """Publish an agent's frame; never after the task's end, never one the card omits.

        Raises TypeError or ValueError (naming the key) for a value that is not JSON.
        """
        if name not in self.manager.frame_names:
            raise ValueError(f"'{name}' is not a frame this capsule's card lists")
        if not isinstance(text, str):
            raise TypeError(f"frame '{name}': text must be a string, not {type(text).__name__}")
        # NOTE: copied and checked now: the event is immutable once published, and a
        # value that is not JSON fails this call rather than every stream that meets it.
        fields = own_fields(name, fields)
        record = self.record
        with self.store.lock:
            if self.cancelled():
                raise TaskCanceled(record.id)
            event = frames.frame_later(name, text, fields, record)
            published = self._within_locked(event.size)
            if published:
                self.manager.publish_locked(record, event, frame=True)
        self._written(published)

    def artifact(self, artifact: dict, append: bool, last: bool) -> None:
        """Keep an agent's artifact (or chunk) on the task and publish its artifactUpdate.

        A chunk with ``append`` adds its parts to the artifact of the same id. It is no
        change of the task's state: the task keeps its place in ListTasks' order and its
        status.timestamp (a walk returns every task once while none changes state); only
        its cached wire form is dropped.
        """
        record = self.record
        with self.store.lock:
            if self.cancelled():
                raise TaskCanceled(record.id)
            event = frames.artifact_later(record, artifact, append=append, last_chunk=last)
            published = self._within_locked(event.size)
            if published:
                self._keep_locked(artifact, append)
                record.touch()
                self.manager.publish_locked(record, event)
        self._written(published)

    def _keep_locked(self, artifact: dict, append: bool) -> None:
        """Keep an artifact (or add a chunk's parts to the one of its id) on the task."""
        record = self.record
        held = record.agent_artifacts
        if held is None:
            held = record.agent_artifacts = {}
        if append:
            # PERF: the chunk's parts go onto the kept artifact's own list, in place:
            # copying the list each chunk made N chunks cost N^2 / 2 under the lock;
            # and its artifact is found by id, not searched among the task's others.
            kept = held.get(artifact["artifactId"])
            if kept is not None:
                kept["parts"].extend(artifact["parts"])
        else:
            # NOTE: the task keeps a copy whose parts list is its own: the first
            # chunk's event, built later from ``artifact``, still shows its own parts.
            # Names are unique within a task (agents/artifacts.Artifacts).
            held[artifact["artifactId"]] = dict(artifact, parts=list(artifact["parts"]))

    def usage(self, report: tuple) -> None:
        """Add a checked ``RunUsage.check`` report to the task's usage."""
        record = self.record
        with self.store.lock:
            # NOTE: as every call: a finished task's size (retention) was counted at its end.
            if self.cancelled():
                raise TaskCanceled(record.id)
            if record.usage is None:
                record.usage = RunUsage()
            model = report[3]
            new = record.usage.check_room(model, self.manager.max_usage_models,
                                          "tasks.max_usage_models")
            published = not new or self._within_locked(utf8_bytes(model or ""))
            if published:
                record.usage.add(*report)
        self._written(published)

    def _within_locked(self, size: int) -> bool:
        """Count ``size`` bytes the agent wrote (an event's, as the replay buffer counts
        it); False once past ``tasks.max_output_bytes``, the task ended FAILED."""
        if self.output.add(size):
            return True
        self.manager.fail_overflowing_locked(self.record)
        return False

    def _written(self, published: bool) -> None:
        """After a write, out of the lock: refuse it past the bound, or give way now and
        then (murmur_wsgi/turns.py)."""
        if not published:
            self._stopped()
        self._turn_ends = turn(self._turn_ends)

    def _stopped(self):
        """The agent wrote past its bound: its task's end is written, its call refused."""
        self.session.trace.flush()
        raise TaskCanceled(self.record.id)

    def record_event(self, event_type: str, fields: dict) -> str:
        return self.trace.task_event(self.record.id, event_type, fields)

    # --- input and background work ------------------------------------------

    def ask(self, question: str) -> Reply:
        """Pause the task in INPUT_REQUIRED until a reply, a cancel, a timeout or close."""
        record = self.record
        with self.store.lock:
            runtime = record.runtime
            if runtime is None or runtime.cancelled:
                raise TaskCanceled(record.id)
            runtime.reply = None
            self.store.change_locked(record, state=INPUT_REQUIRED, prompt=question)
            for artifact in record.door_artifacts():
                self.manager.publish_locked(record, frames.artifact_later(record, artifact))
            self.manager.publish_locked(record, frames.recorded_status_later(record))
            session = self.session
            got = runtime.cond.wait_for(
                lambda: runtime.reply is not None or runtime.cancelled or session.closing
                or runtime.interrupted, self.manager.input_timeout)
            if runtime.reply is None and runtime.interrupted and not runtime.cancelled \
                    and not session.closing:
                runtime.interrupted = False
                raise AskInterrupted(record.id)
            if runtime.cancelled or (not got and session.closing) or runtime.reply is None:
                if runtime.cancelled or session.closing:
                    raise TaskCanceled(record.id)
                raise TaskFailed("input-timeout")
            reply, runtime.reply = runtime.reply, None
            return reply

    def interrupt_ask(self) -> None:
        with self.store.lock:
            runtime = self.record.runtime
            if runtime is not None:
                runtime.interrupted = True
                runtime.cond.notify_all()

    def delegate(self) -> str:
        return self.delegations.expect(self.record)

    def wait_completion(self, delegation_id: str, timeout: float | None) -> str | None:
        return self.delegations.wait(self.record, delegation_id, timeout)

    def background(self, command: str) -> str:
        try:
            return self.manager.works.start(command, self.record.id).id
        except CommandRefused as ex:
            raise TaskFailed(f"background command refused: {ex}") from None
