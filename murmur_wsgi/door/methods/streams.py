"""SendStreamingMessage, SubscribeToTask, murmur.WatchSession: the door's streams.

Every refusal is raised before an ``EventStream`` exists, so it is answered as
one JSON body. A task's stream opens its ring reader under the store's lock,
at the same instant as the task snapshot it writes first: every later event
of the task is on the reader, none of the earlier ones is repeated.
"""
from __future__ import annotations

import logging
import re

from murmur_wsgi.errors import UnsupportedOperationError
from murmur_wsgi.door.methods import messages, tasks
from murmur_wsgi.door.tasks import frames
from murmur_wsgi.door.streams.sse import EventStream
from murmur_wsgi.door.tasks.record import SUBMITTED
from murmur_wsgi.serving.connection import peer_gone
from murmur_wsgi.serving.ows import OWS
from murmur_wsgi.uris import DOOR_URI, STREAM_URI

logger = logging.getLogger(__name__)

_NUMBER = re.compile(r"[0-9]+\Z")
NEVER_ISSUED = 10 ** 18


def last_event_id(environ: dict) -> int | None:
    """The request's Last-Event-ID: None when absent, 0 when it is not a number."""
    raw = environ.get("HTTP_LAST_EVENT_ID")
    if raw is None:
        return None
    raw = raw.strip(OWS)
    if not _NUMBER.match(raw):
        return 0
    # NOTE: a number longer than any id the session can issue names an id never issued;
    # its leading zeros say nothing (0041 is 41).
    raw = raw.lstrip("0") or "0"
    return int(raw) if len(raw) <= 18 else NEVER_ISSUED


def _ended_event(record) -> list | None:
    """The ended task as one unnumbered task event; None while it is live.

    NOTE: as GetTask answers it, unnumbered like the opening: the lost events'
    ids are gone, and a task event carries its end whole.
    """
    return [frames.task_parts(record.to_json())] if record.terminal else None


def _ended(store, record):
    """``EventStream``'s recover: the ended task, or None while it is live."""
    def recover():
        return None if record is None else store.read(record, _ended_event)
    return recover


def _stream(door, call, opening, reader=None, follow=None) -> EventStream:
    # NOTE: the record itself, not looked up again by id: the task may have ended and
    # been evicted since it was accepted, and its stream must still learn its end.
    recover = None if follow is None else _ended(door.session.store, follow)
    return EventStream(call.id, opening, reader,
                       follow_task=None if follow is None else follow.id, recover=recover,
                       peer_gone=peer_gone(call.environ),
                       closing=lambda: door.session.closing,
                       heartbeat_secs=door.manifest.stream["heartbeat_secs"],
                       pending_bytes=door.manifest.stream["pending_bytes"])


def _task_opening(door, snapshot: str, frames_on: bool) -> list:
    """The task as GetTask answers it; then, with the extension, connection-ack."""
    opening = [(None, frames.task_parts(snapshot))]
    if frames_on:
        mode = door.manifest.lifecycle["conversation"]
        opening.append((None, frames.connection_ack("client", mode)))
    return opening


class _TaskCut:
    """Opens a task's reader under the store's lock, with the snapshot it follows.

    ``replay_from`` (the request's Last-Event-ID) replays the task's held frames
    after that id, between the opening and the live events: its older status and
    artifact events are not replayed, since the snapshot that opens the stream
    already carries what they said (a client applying events in order never sees
    the task go back). A task being accepted right now has nothing to replay.
    """

    def __init__(self, ring, frames_on: bool, replay_from: int | None):
        self.ring = ring
        self.frames_on = frames_on
        self.replay_from = replay_from
        self.reader = None
        self.snapshot = None

    def open_live(self, record) -> str:
        """Open the reader if the task is live (under the store's lock); return its state."""
        if not record.terminal:
            self(record)
        return record.state

    def __call__(self, record) -> None:
        # NOTE: runs under the store's lock (TaskManager.submit's on_accept, or below).
        self.snapshot = record.to_json()
        replay = self.replay_from is not None and record.state != SUBMITTED
        self.reader = self.ring.reader(task_id=record.id, frames=self.frames_on,
                                       replay=replay, replay_from=self.replay_from,
                                       replay_frames_only=True)


def send_streaming_message(door, call, message):
    """SendStreamingMessage: the task, then its events until its terminal status."""
    session = door.session
    frames_on = STREAM_URI in call.ctx.extensions
    cut = _TaskCut(session.ring, frames_on, last_event_id(call.environ))
    try:
        record, snapshot, _message = messages.accept(door, call, message, cut)
    except BaseException:
        if cut.reader is not None:
            cut.reader.close()
        raise
    if frames_on:
        call.used_extensions.append(STREAM_URI)
    if cut.reader is None:
        # Rejected (busy or closing): one unnumbered task event, then the end.
        return _stream(door, call, [(None, frames.task_parts(snapshot))])
    return _stream(door, call, _task_opening(door, cut.snapshot, frames_on), cut.reader,
                   follow=record)


def subscribe_to_task(door, call, params):
    """SubscribeToTask: a live task's snapshot, then its events until its end."""
    record = tasks.visible(door, call, params.id)
    session = door.session
    frames_on = STREAM_URI in call.ctx.extensions
    cut = _TaskCut(session.ring, frames_on, last_event_id(call.environ))
    state = session.store.read(record, cut.open_live)
    if cut.reader is None:
        raise UnsupportedOperationError(
            f"Task {record.id} has ended in {state}; it has no more events to stream",
            taskId=record.id, state=state)
    if frames_on:
        call.used_extensions.append(STREAM_URI)
    return _stream(door, call, _task_opening(door, cut.snapshot, frames_on), cut.reader,
                   follow=record)


def watch_session(door, call, params: None):
    """murmur.WatchSession: connection-ack, the replay, then every task's events."""
    session = door.session
    after = last_event_id(call.environ)
    reader = session.ring.reader(frames=True, replay=True, replay_from=after or 0)
    call.used_extensions.extend((DOOR_URI, STREAM_URI))
    ack = frames.connection_ack("observer", door.manifest.lifecycle["conversation"])
    return _stream(door, call, [(None, ack)], reader)
