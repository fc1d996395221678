"""What a run's ``TaskContext`` calls on its task: cancel checks, progress, frames,
artifacts, usage, a question to the client, a background command.

``AgentCalls`` is the agent side of ``TaskManager`` (``tasks/manager.py``), which
it is mixed into: it uses the manager's ``store`` (its lock guards every change),
``session``, ``works``, ``frame_names``, ``input_timeout`` and ``_publish``. Each
call made after the task's cancel (or end) raises ``TaskCanceled``.
"""
from __future__ import annotations

import logging

from murmur_wsgi.agents.base import TaskCanceled, TaskFailed
from murmur_wsgi.agents.owned import own_fields
from murmur_wsgi.agents.usage import RunUsage
from murmur_wsgi.door.tasks import frames
from murmur_wsgi.door.tasks.record import INPUT_REQUIRED, TaskRecord
from murmur_wsgi.door.tasks.works import CommandRefused

logger = logging.getLogger(__name__)


class AgentCalls:
    """The calls of a running agent on its task (the manager's agent side)."""

    def is_cancelled(self, record: TaskRecord) -> bool:
        runtime = record.runtime
        return runtime is None or runtime.cancelled

    def on_cancel(self, record: TaskRecord, waker) -> None:
        """Call ``waker()`` once the task is canceled or the session closes (now if so)."""
        with self.store.lock:
            runtime = record.runtime
            if runtime is not None and not runtime.cancelled and not self.session.closing:
                if runtime.wakers is None:
                    runtime.wakers = []
                runtime.wakers.append(waker)
                return
        waker()

    def wait_cancelled(self, record: TaskRecord, seconds: float) -> bool:
        with self.store.lock:
            runtime = record.runtime
            if runtime is None:
                return True
            session = self.session
            return runtime.cond.wait_for(lambda: runtime.cancelled or session.closing, seconds)

    def progress(self, record: TaskRecord, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"progress: text must be a string, not {type(text).__name__}")
        with self.store.lock:
            if self.is_cancelled(record):
                raise TaskCanceled(record.id)
            self._publish(record, frames.status_later(record, text))

    def frame(self, record: TaskRecord, name: str, text: str, fields: dict) -> None:
        """Publish an agent's frame; never after the task's end, never one the card omits.

        Raises TypeError or ValueError (naming the key) for a value that is not JSON.
        """
        if name not in self.frame_names:
            raise ValueError(f"'{name}' is not a frame this capsule's card lists")
        if not isinstance(text, str):
            raise TypeError(f"frame '{name}': text must be a string, not {type(text).__name__}")
        # NOTE: copied and checked now: the event is immutable once published, and a
        # value that is not JSON fails this call rather than every stream that meets it.
        fields = own_fields(name, fields)
        with self.store.lock:
            if self.is_cancelled(record):
                raise TaskCanceled(record.id)
            self._publish(record, frames.frame_later(name, text, fields, record), frame=True)

    def publish_artifact(self, record: TaskRecord, artifact: dict, append: bool,
                         last_chunk: bool) -> None:
        """Keep an agent's artifact (or chunk) on the task and publish its artifactUpdate.

        A chunk with ``append`` adds its parts to the artifact of the same id.
        """
        with self.store.lock:
            if self.is_cancelled(record):
                raise TaskCanceled(record.id)
            held = record.agent_artifacts
            if held is None:
                held = record.agent_artifacts = []
            if append:
                for i, kept in enumerate(held):
                    if kept["artifactId"] == artifact["artifactId"]:
                        # NOTE: a new dict: an event built later still shows its own chunk.
                        held[i] = dict(kept, parts=kept["parts"] + artifact["parts"])
                        break
            else:
                held.append(artifact)
            self.store.change_locked(record)
            self._publish(record, frames.artifact_later(record, artifact, append=append,
                                                        last_chunk=last_chunk))

    def record_usage(self, record: TaskRecord, report: tuple) -> None:
        """Add a checked ``RunUsage.check`` report to the task's usage."""
        with self.store.lock:
            if record.usage is None:
                record.usage = RunUsage()
            record.usage.add(*report)

    def ask(self, record: TaskRecord, question: str) -> str:
        """Pause the task in INPUT_REQUIRED until a reply, a cancel, a timeout or close."""
        with self.store.lock:
            runtime = record.runtime
            if runtime is None or runtime.cancelled:
                raise TaskCanceled(record.id)
            runtime.reply = None
            self.store.change_locked(record, state=INPUT_REQUIRED, prompt=question)
            for artifact in record.door_artifacts():
                self._publish(record, frames.artifact_later(record, artifact))
            self._publish(record, frames.recorded_status_later(record))
            session = self.session
            got = runtime.cond.wait_for(
                lambda: runtime.reply is not None or runtime.cancelled or session.closing,
                self.input_timeout)
            if runtime.cancelled or (not got and session.closing) or runtime.reply is None:
                if runtime.cancelled or session.closing:
                    raise TaskCanceled(record.id)
                raise TaskFailed("input-timeout")
            reply, runtime.reply = runtime.reply, None
            return reply

    def background(self, record: TaskRecord, command: str) -> str:
        try:
            return self.works.start(command, record.id).id
        except CommandRefused as ex:
            raise TaskFailed(f"background command refused: {ex}") from None
