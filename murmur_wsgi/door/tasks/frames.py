"""The door's StreamResponse payloads, from its records: A2A events and murmur frames.

The shapes are built by ``wire/stream.py``; this module gives them the door's
values (a record, a fresh message id) and defers them until a reader needs one.
"""
from __future__ import annotations

import logging
from sys import getsizeof

from murmur_wsgi.ids import new_id
from murmur_wsgi.wire import stream as wire_stream
from murmur_wsgi.wire.task import now_ms

logger = logging.getLogger(__name__)


def task_event(record) -> str:
    """``{"task": …}``: the task as GetTask answers it."""
    return wire_stream.task_event(record.to_json())


def task_parts(snapshot: str) -> tuple:
    """``{"task": …}`` around a task's wire form, as parts: a stream writes them without a copy."""
    return ('{"task":', snapshot, "}")


def status_update(record, text: str | None = None, *, from_record: bool = False) -> str:
    """``{"statusUpdate": …}``: the task's recorded status, or a status written now.

    ``from_record``: the status as GetTask reports it (a terminal status).
    Otherwise a status as it happens, carrying ``text`` when given, stamped now.
    """
    if from_record:
        return wire_stream.status_update(record.id, record.context_id, record.status())
    return _status_at(record.id, record.context_id, record.state, text, now_ms())


def _status_at(task_id: str, context_id: str, state: str, text: str | None, ms: int,
               message_id: str | None = None) -> str:
    return wire_stream.status_now(task_id, context_id, state, text, ms,
                                  message_id or (new_id("msg") if text is not None else None))


class Deferred:
    """A payload serialized when a reader first needs it (most events are never read).

    It holds the values of the moment it was made, its messageId included (given
    when the event is published), so it reads the same whenever, and however
    often, it is built: two readers building it at once get the same text.
    ``EventRing`` keeps the text.
    ``size`` is about what it holds until built: its strings' lengths, and its lists' and
    objects' memory (``EventRing``'s bound, and a task's ``tasks.max_output_bytes``).
    PERF: taken once, as it is made: the agent's writes and the ring both read it.
    """

    __slots__ = ("_build", "_args", "size")

    def __init__(self, build, *args):
        self._build = build
        self._args = args
        self.size = sum(map(_size, args))

    def __call__(self) -> str:
        return self._build(*self._args)


def _size(value) -> int:
    """Characters of the ASCII strings in ``value`` (a record: its ids and status message),
    the memory of its other strings, and the memory of its lists and dicts themselves.

    MEMORY: a list or a dict counts what it takes, not only its items: an agent's value of
    300,000 empty lists is 0.9 MB of JSON and holds 19 MB until a reader builds the event;
    by its items alone it would count nothing toward ``stream.replay_bytes``.
    """
    if isinstance(value, str):
        # MEMORY: a text outside ASCII is held with up to 4 bytes a character (all of its
        # characters, for one emoji): its memory, not its length (both O(1)).
        return len(value) if value.isascii() else getsizeof(value)
    if isinstance(value, dict):
        return getsizeof(value) + sum(len(key) + _size(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return getsizeof(value) + sum(map(_size, value))
    context_id = getattr(value, "context_id", None)
    if isinstance(context_id, str):
        # NOTE: a record: what its terminal status carries (the id and context twice).
        status_text = value.status_text
        return 2 * (len(value.id) + len(context_id)) + (
            len(status_text) if isinstance(status_text, str) else 0)
    return 8


def status_later(record, text: str | None = None) -> Deferred:
    """``status_update(record, text)`` as of now, built on first read."""
    return Deferred(_status_at, record.id, record.context_id, record.state, text, now_ms(),
                    None if text is None else new_id("msg"))


def recorded_status_later(record) -> Deferred:
    """The task's recorded status (GetTask's), built on first read.

    NOTE: a terminal task never changes again, so it is read when built; a
    paused task's status carries no message, so it is taken as of now.
    """
    if record.terminal:
        return Deferred(_recorded_status, record)
    return Deferred(_status_at, record.id, record.context_id, record.state, None,
                    record.changed_ms)


def _recorded_status(record) -> str:
    return status_update(record, from_record=True)


def artifact_later(record, artifact: dict, *, append: bool = False,
                   last_chunk: bool = True) -> Deferred:
    return Deferred(artifact_update, record, artifact, append, last_chunk)


def frame_later(name: str, text: str, fields: dict | None, record) -> Deferred:
    """An agent's frame, its messageId fixed now; ``fields`` must be the door's own copy."""
    return Deferred(frame, name, text, fields, record, new_id("msg"))


def artifact_update(record, artifact: dict, append: bool = False,
                    last_chunk: bool = True) -> str:
    """``{"artifactUpdate": …}``: a whole artifact (the default), or one chunk of it."""
    return wire_stream.artifact_update(record.id, record.context_id, artifact, append,
                                       last_chunk)


def frame(name: str, text: str, fields: dict | None = None, record=None,
          message_id: str | None = None) -> str:
    """A murmur frame: a ROLE_AGENT message whose metadata carries the frame under the URI."""
    if record is None:
        return wire_stream.frame(name, text, fields, message_id or new_id("msg"))
    return wire_stream.frame(name, text, fields, message_id or new_id("msg"), record.id,
                             record.context_id)


def connection_ack(role: str, conversation_mode: str) -> str:
    return frame("connection-ack", "connection-ack",
                 {"role": role, "conversationMode": conversation_mode})


def gap(first_available_id: int) -> str:
    return frame("gap", f"gap: events before {first_available_id} are no longer held",
                 {"firstAvailableId": first_available_id})


def lagged(missed: int) -> str:
    return frame("lagged", f"lagged: {missed} events were missed", {"missed": missed})


def capsule_closed() -> str:
    return frame("capsule-closed", "capsule-closed", {})
