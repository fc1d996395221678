"""A hub task: its record and its states; its wire forms are built by ``wire/``.

The hub's Task is the door's shape (``wire/task.py``) with the hub's values: a task
keeps its message as history, its status message's id is ``<task id>-status``, its
answer is the ``answer`` artifact, and it writes UTF-8 unescaped. Its events and status
texts are ``hub/task_events.py``'s, named here too for the modules that read a task.
"""
from __future__ import annotations

import json
import logging

from murmur_wsgi.hub.task_events import (ANSWER, answer_artifact, answer_json,  # noqa: F401
                                         artifact_event, artifact_event_around,
                                         artifact_update, artifacts_of, final_texts, ids_json,
                                         progress_status, started_event, status_json,
                                         status_update, task_status)
from murmur_wsgi.wire import stream as wire_stream
from murmur_wsgi.wire import task as wire_task
from murmur_wsgi.wire.encode import compact_utf8
from murmur_wsgi.wire.task import (ALL_STATES, CANCELED, COMPLETED, FAILED,  # noqa: F401
                                   REJECTED, SUBMITTED, TERMINAL, WORKING, data_part, now_ms)

logger = logging.getLogger(__name__)

__all__ = ["HubTask", "as_task", "SUBMITTED", "WORKING", "COMPLETED", "FAILED", "CANCELED", "REJECTED",
           "TERMINAL", "ANSWER", "data_part", "status_update", "artifact_update",
           "artifact_event", "artifact_event_around", "final_texts", "started_event",
           "status_json", "task_status", "progress_status", "answer_artifact", "answer_json",
           "artifacts_of"]

def _last(history: list, count: int) -> list:
    """The last ``count`` turns of ``history`` (all of them when it has fewer)."""
    return history[max(0, len(history) - count):] if count else []


class HubTask:
    """One task of one tenant's agent: the record a store keeps.

    A store hands out the record and changes it only under its own lock;
    readers outside the store use ``to_dict``/``to_json`` (also under it for
    the memory store, see ``MemoryTaskStore.render``).
    """

    __slots__ = ("id", "context_id", "tenant", "agent", "message_id", "state", "status_text",
                 "status_ms", "created_ms", "seq", "_history", "_artifacts", "_json", "written",
                 "_shape", "_version", "_history_json")

    def __init__(self, task_id: str, context_id: str, tenant: str, agent: str,
                 message_id: str, message: dict):
        self.id = task_id
        self.context_id = context_id
        self.tenant = tenant
        self.agent = agent
        self.message_id = message_id
        self.written = 0        # the last of its run's numbered events stored (exactly once)
        self.state = SUBMITTED
        self.status_text: str | None = None
        self.created_ms = self.status_ms = now_ms()
        self.seq = 0                          # creation order in its tenant + agent (the store's)
        # PERF: the slots themselves, not their properties (a call each)
        self._history = [message]             # the message that created it
        self._artifacts: list = []
        self._json: str | None = None
        self._shape: tuple | None = None      # a frozen task's (``freeze``)
        self._version = 0                     # bumped by each change (``draft``)
        self._history_json: str | None = None   # ``history_json``'s, once encoded

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    # A frozen task (``freeze``) keeps its history and artifacts in its wire form only.
    @property
    def history(self) -> list:
        found = self._history
        return self.whole()["history"] if found is None else found

    @history.setter
    def history(self, value: list) -> None:
        self._history = value
        self._history_json = None

    def history_json(self) -> str:
        """``compact_utf8(self.history)``, encoded once (PERF: a new task's wire form and the
        Redis store's record both hold it: its message is encoded once, not twice)."""
        text = self._history_json
        if text is None:
            text = compact_utf8(self.history)
            if self._history is not None:
                self._history_json = text
        return text

    @property
    def artifacts(self) -> list:
        found = self._artifacts
        return self.whole().get("artifacts", []) if found is None else found

    @artifacts.setter
    def artifacts(self, value: list) -> None:
        self._artifacts = value

    def contents(self) -> tuple[list, list]:
        """``(history, artifacts)``, a frozen task's read from its wire form once.

        Safe outside the store's lock: ``freeze`` sets the wire form before it lets the
        lists go, so a task frozen between the two reads is read whole from that form."""
        history, artifacts = self._history, self._artifacts
        if history is None or artifacts is None:
            whole = self.whole()
            return whole.get("history", []), whole.get("artifacts", [])
        return history, artifacts

    def artifacts_at_least(self) -> int:
        """A lower bound of its artifacts' JSON in UTF-8 bytes, found without encoding them: a
        frozen task's their place in its wire form (in characters), another's the characters
        of their text parts. PERF: a push's final body (push/body.py) needs no render of
        artifacts that cannot fit it."""
        artifacts = self._artifacts         # NOTE: once: ``freeze`` may let it go meanwhile
        if artifacts is None:
            start, end, _count = self._shape
            return end - start
        return sum(len(part["text"]) for artifact in artifacts
                   if isinstance(artifact, dict) and isinstance(artifact.get("parts"), list)
                   for part in artifact["parts"]
                   if isinstance(part, dict) and isinstance(part.get("text"), str))

    def whole(self) -> dict:
        """The task as GetTask answers it, as a new dict (a frozen task's record)."""
        return json.loads(self.to_json())

    def freeze(self, last: str | None = None) -> None:
        """A finished task as its wire form only: ``history`` and ``artifacts`` are read from
        it (a new copy at each read), and a form without its artifacts is that text with
        their place cut out (``_shape``: where they are, how long the history is). It
        changes no more. ``last``: its last artifact's JSON, encoded already.

        MEMORY: one join of its pieces, ``last`` quoted: encoded again, then copied into
        the artifacts' text and that into the form, a long answer was four copies of it."""
        if self._history is None:
            return
        head, arts, hist = self._pieces(last)
        self._json = "".join((head, *arts, hist, "}"))
        self._shape = (len(head), len(head) + sum(map(len, arts)), len(self._history))
        self._history = self._artifacts = self._history_json = None

    def _pieces(self, last: str | None = None) -> tuple[str, tuple, str]:
        """A task's full wire form (not frozen) in three parts: up to its status, its
        artifacts (texts; ``last``, when given, as the JSON of the last), its history
        (``""``, ``()`` when it has none), its closing brace left out.

        NOTE: in ``wire.task.task``'s order: the text ``compact_utf8(self.to_dict())`` is.
        PERF: the status written as ``status_json`` writes it, the history encoded once
        (``history_json``)."""
        head = self.head_json()
        artifacts = self._artifacts
        if not artifacts:
            arts = ()
        elif last is None:
            arts = (',"artifacts":', compact_utf8(artifacts))
        elif len(artifacts) == 1:
            arts = (',"artifacts":[', last, "]")
        else:
            arts = (',"artifacts":', compact_utf8(artifacts[:-1])[:-1], ",", last, "]")
        hist = f',"history":{self.history_json()}' if self._history else ""
        return head, arts, hist

    def head_json(self) -> str:
        """Its wire form up to its status (its ids and status; the closing brace left out)."""
        status = status_json(self.id, self.context_id, self.state, self.status_text,
                             self.status_ms)
        return f'{{"id":{ids_json(self.id, self.context_id)}{status}'

    def record(self, last: str | None = None) -> tuple:
        """The task, frozen (``freeze``'s ``last``), as one tuple of strings and numbers
        (``as_task`` makes it a task again): what the memory store keeps of a finished task.

        MEMORY: a store keeps up to ``tasks.max_per_tenant`` finished tasks per tenant, and
        each full collection of Python's garbage collector walks every object it tracks
        with the worker stopped. As a task with its lists and dicts, a finished task was
        sixteen such objects (766 ms a collection at 100,000 tasks, docs/performance.md);
        a tuple of strings and numbers is none once the collector has seen it."""
        self.freeze(last)
        return (self.id, self.context_id, self.tenant, self.agent, self.message_id, self.state,
                self.status_text, self.status_ms, self.created_ms, self.seq, self._json,
                self.written, *self._shape)

    @staticmethod
    def record_json(record: tuple, tenant: str, agent: str) -> str | None:
        """A record's wire form, when it is a task of ``tenant``'s ``agent`` (else None)."""
        return record[10] if record[2] == tenant and record[3] == agent else None

    @classmethod
    def from_record(cls, record: tuple) -> HubTask:
        task = cls.__new__(cls)
        (task.id, task.context_id, task.tenant, task.agent, task.message_id, task.state,
         task.status_text, task.status_ms, task.created_ms, task.seq, task._json,
         task.written) = record[:12]
        task._shape = record[12:]
        task._history = task._artifacts = task._history_json = None
        return task

    def set_state(self, state: str, text: str | None = None) -> None:
        if self._history is None:
            raise RuntimeError(f"task {self.id} is frozen: it changes no more")
        self.state = state
        self.status_text = text
        self.status_ms = now_ms()
        self._json = None
        self._version += 1

    def set_artifacts(self, artifacts: list) -> None:
        self.artifacts = artifacts
        self._json = None
        self._version += 1

    def draft(self) -> str | tuple:
        """Its full wire form (``to_json()``'s), read under the store's lock: its text when
        it has one (cached, or frozen), else ``(the value to encode, its version)``, which
        ``drafted`` encodes outside the lock and ``keep_json`` caches under it again.

        NOTE: the value holds the task's own lists, which a change replaces, never alters;
        so it is the task as it was, however the task changes while it is encoded."""
        if self._json is not None:
            return self._json
        return self.to_dict(), self._version

    @staticmethod
    def drafted(draft: str | tuple) -> str:
        """The text of a ``draft`` (encoded when it is a value: outside the store's lock)."""
        return draft if type(draft) is str else compact_utf8(draft[0])

    def keep_json(self, draft: str | tuple, text: str) -> None:
        """Cache ``text``, the text of ``draft``, unless the task changed since (under the
        store's lock again): a text encoded outside it is never kept stale."""
        if type(draft) is tuple and self._json is None and self._version == draft[1]:
            self._json = text

    def status(self) -> dict:
        return task_status(self.id, self.context_id, self.state, self.status_text,
                           self.status_ms)

    def to_dict(self, history_length: int | None = None, artifacts: bool = True) -> dict:
        if self._history is None:
            whole = self.whole()
            if not artifacts:
                whole.pop("artifacts", None)
            if history_length is not None:
                history = _last(whole.pop("history", []), history_length)
                if history:
                    whole["history"] = history
            return whole
        history = self._history             # PERF: not frozen: the slots, not the properties
        if history_length is not None:
            history = _last(history, history_length)
        return wire_task.task(self.id, self.context_id, self.status(),
                              self._artifacts if artifacts and self._artifacts else None,
                              history=history or None)

    def to_json(self, history_length: int | None = None, artifacts: bool = True,
                cache: bool = True) -> str:
        """The task as GetTask answers it; the full form is cached until it changes.

        ``cache=False``: serialized without keeping the text (a held request's one
        answer), so a finished task nobody reads holds no copy.
        A frozen task's: its text, with the place of its artifacts or of its history (the
        last) cut out when they are left out.
        """
        if self._history is None:
            start, end, count = self._shape
            text = self._json
            if history_length is not None and history_length < count:
                if history_length:
                    return compact_utf8(self.to_dict(history_length, artifacts))
                # NOTE: the history is last: cut off, with the artifacts before it when they
                # are left out (PERF: not a copy of them first).
                return (text[:end] if artifacts else text[:start]) + "}"
            return text if artifacts or start == end else text[:start] + text[end:]
        if history_length is None and artifacts:
            text = self._json
            if text is None:
                head, arts, hist = self._pieces()
                text = "".join((head, *arts, hist, "}"))
                if cache:
                    self._json = text
            return text
        return compact_utf8(self.to_dict(history_length, artifacts))

    def task_event(self) -> str:
        return wire_stream.task_event(self.to_json())

    def status_event(self) -> str:
        return status_update(self.id, self.context_id, self.status())


def as_task(entry) -> HubTask:
    """A store's entry as a task: a ``HubTask`` as it is, a record (``HubTask.record``) as a
    new, frozen one."""
    return HubTask.from_record(entry) if type(entry) is tuple else entry


def status_ms(entry) -> int:
    """A store's entry's status time (ms): a ``HubTask``'s, or a record's, read in place."""
    return entry[7] if type(entry) is tuple else entry.status_ms


def filed_under(entry) -> tuple[str, str]:
    """A store's entry's ``(context id, state)``: a ``HubTask``'s, or a record's, in place."""
    return (entry[1], entry[5]) if type(entry) is tuple else (entry.context_id, entry.state)
