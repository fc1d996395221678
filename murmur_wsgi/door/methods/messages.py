"""SendMessage: read the message, route it by taskId, answer held or at once."""
from __future__ import annotations

import logging

from murmur_wsgi.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from murmur_wsgi.door.tasks import render
from murmur_wsgi.door.tasks.record import INPUT_REQUIRED, REJECTED, TERMINAL
from murmur_wsgi.uris import DOOR_URI
from murmur_wsgi.wire.message import IncomingMessage, read_message
from murmur_wsgi.wire.raw import RawJSON
from murmur_wsgi.wire.stream import task_event

logger = logging.getLogger(__name__)


def continued_task(door, call, message):
    """Route a message naming a taskId ("Continuing a task"); return the waiting task."""
    record = door.session.store.get(message.task_id)
    if record is None or not call.ctx.sees(record.owner):
        raise TaskNotFoundError(message.task_id)
    state = record.state
    if state in TERMINAL:
        raise UnsupportedOperationError(
            f"Task {record.id} has ended in {state}; send a new message without taskId, "
            "in the same contextId, to start a new task", taskId=record.id, state=state)
    if state != INPUT_REQUIRED:
        raise UnsupportedOperationError(
            f"Task {record.id} is {state}; a task takes a message only while it waits in "
            f"{INPUT_REQUIRED}", taskId=record.id, state=state)
    if message.context_id is not None and message.context_id != record.context_id:
        raise InvalidParamsError(
            f"Invalid params: message.contextId {message.context_id} is not the context of task "
            f"{record.id}, which waits in {record.context_id}")
    return record


def references(door, call, ids: list[str]) -> list:
    """The referenced tasks as each stands now; None for one the caller does not see."""
    out = []
    store = door.session.store
    for task_id in ids:
        record = store.get(task_id)
        if record is None or not call.ctx.sees(record.owner):
            out.append((task_id, None))
            continue
        out.append((task_id, store.read(record, render.RefView.from_record)))
    return out


def task_result(snapshot: str) -> RawJSON:
    return RawJSON(task_event(snapshot))


def message_params(door, call) -> IncomingMessage:
    """The params of SendMessage and SendStreamingMessage: the message, read in full."""
    return read_message(call.params, door.manifest)


def accept(door, call, message: IncomingMessage, on_accept=None, hold: bool = False):
    """Route a message that was read, without waiting; return (record, snapshot, message).

    ``on_accept(record)`` runs under the store's lock as the task takes the
    message (see ``TaskManager.submit``). Without one, the snapshot — the task
    as GetTask answers it at that moment — is taken there when the answer is
    given at once (returnImmediately), and is None for a held request.
    ``hold``: the caller waits for the task to settle (see ``TaskManager.submit``).
    """
    if message.door_extension:
        call.used_extensions.append(DOOR_URI)
    manager = door.session.manager
    taken = []
    if on_accept is None and message.return_immediately:
        on_accept = lambda record: taken.append(record.to_json())  # noqa: E731
    if message.task_id is not None:
        record = continued_task(door, call, message)
        # NOTE: the reply reads as its sender's text: fenced unless the sender is trusted.
        reply = render.agent_text(message, [], untrusted=call.ctx.trust != "trusted",
                                  origin=call.ctx.origin,
                                  data_bytes=door.manifest.limits["data_text_bytes"])
        while not manager.deliver_reply(record, reply, on_accept, source=message.source):
            record = continued_task(door, call, message)   # it moved on: this raises why
    else:
        text, echoes = render.start_text(
            message, references(door, call, message.reference_task_ids),
            untrusted=call.ctx.trust != "trusted", origin=call.ctx.origin,
            reference_bytes=door.manifest.limits["reference_bytes"],
            data_bytes=door.manifest.limits["data_text_bytes"])
        data = [part[1] for part in message.parts if part[0] == "data"]
        record = manager.submit(call.ctx, message.context_id,
                                (text, list(message.images), data, message.source,
                                 call.ctx.caller), message, on_accept, echoes=echoes,
                                hold=hold)
        if record.state == REJECTED:
            return record, record.to_json(), message
    return record, (taken[0] if taken else None), message


def send_message(door, call, message: IncomingMessage):
    """SendMessage: held until the task settles, unless returnImmediately is true."""
    record, snapshot, message = accept(door, call, message,
                                       hold=not message.return_immediately)
    if record.state == REJECTED or message.return_immediately:
        return task_result(snapshot)
    door.session.manager.wait_settled(record)
    return task_result(door.session.store.wire(record, cache=False))
