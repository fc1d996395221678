"""GetTask, ListTasks, CancelTask: reading and canceling the tasks a caller sees."""
from __future__ import annotations

import logging

from murmur_wsgi.errors import TaskNotCancelableError, TaskNotFoundError
from murmur_wsgi.door.tasks.store import decode_token, encode_token
from murmur_wsgi.wire.params import ListTasksParams, TaskIdParams, read_list_tasks, read_task_id
from murmur_wsgi.wire.raw import RawJSON, RawJSONPieces
from murmur_wsgi.wire.task import list_tasks_response, list_tasks_response_pieces

logger = logging.getLogger(__name__)


def task_id(door, call) -> TaskIdParams:
    """The params of GetTask, CancelTask and SubscribeToTask: the task's id."""
    return read_task_id(call.params, call.method)


def list_params(door, call) -> ListTasksParams:
    """ListTasks' params; a pageToken names a position of this session's order."""
    session_id = door.session.id
    return read_list_tasks(call.params, lambda token: decode_token(token, session_id))


def visible(door, call, task_id: str):
    """The task ``task_id`` names, if the caller sees it; else -32001 as for a never-held id."""
    record = door.session.store.get(task_id)
    if record is None or not call.ctx.sees(record.owner):
        raise TaskNotFoundError(task_id)
    return record


def get_task(door, call, params: TaskIdParams):
    """GetTask: the task as it stands (historyLength is accepted and ignored).

    A task larger than ``stream.pending_bytes`` is answered from its cached wire
    form itself, not a copy, encoded as it is written (see ``RawJSONPieces``).
    """
    text = door.session.store.wire(visible(door, call, params.id))
    if len(text) > door.manifest.stream["pending_bytes"]:
        return RawJSONPieces((text,))
    return RawJSON(text)


def cancel_task(door, call, params: TaskIdParams):
    """CancelTask: CANCELED with a residue artifact, or -32002 for a task that ended."""
    record = visible(door, call, params.id)
    if not door.session.manager.cancel(record):
        raise TaskNotCancelableError(record.id, record.state)
    return RawJSON(door.session.store.wire(record))


def list_tasks(door, call, params: ListTasksParams):
    """ListTasks: one page, most recently changed first, filters applied afresh.

    A page larger than ``stream.pending_bytes`` is answered from the tasks' cached
    wire forms (as each stood at one moment, under the store's lock), encoded as
    they are written: a client that does not read holds no copy of it.
    """
    session = door.session
    # A cutoff with microseconds compares with a task's milliseconds exactly.
    cutoff_ms = None if params.cutoff_us is None else params.cutoff_us / 1000
    include = params.include_artifacts
    rendered, next_seq, total = session.store.page(
        call.ctx.sees, params.state, cutoff_ms, params.context_id, params.page_size,
        params.after, lambda record: _listed(record, include))
    token = "" if next_seq is None else encode_token(next_seq, session.id)
    if sum(map(len, rendered)) <= door.manifest.stream["pending_bytes"]:
        return RawJSON(list_tasks_response(",".join(rendered), token, params.page_size, total))
    return RawJSONPieces(list_tasks_response_pieces(rendered, token, params.page_size, total))


def _listed(record, include: bool) -> str:
    if not include:
        return record.to_json(artifacts=False)
    if record.artifacts():
        return record.to_json()
    return record.to_json_with_empty_artifacts()
