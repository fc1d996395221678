"""GetTask, ListTasks, CancelTask: reading and canceling the tasks a caller sees."""
from __future__ import annotations

import logging
import re
from datetime import datetime

from murmur_wsgi.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError
from murmur_wsgi.tasks.record import ALL_STATES
from murmur_wsgi.tasks.store import decode_token, encode_token
from murmur_wsgi.wire.raw import RawJSON

logger = logging.getLogger(__name__)

PAGE_DEFAULT = 50
PAGE_MAX = 100
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")
TIMESTAMP_MESSAGE = ("statusTimestampAfter must be an RFC 3339 timestamp, such as "
                     "2026-10-13T09:00:00Z")


def required_id(call) -> str:
    """params.id of GetTask, CancelTask or SubscribeToTask, or -32602 '<Method> requires an id'."""
    task_id = call.params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParamsError(f"{call.method} requires an id")
    return task_id


def visible(door, call, task_id: str):
    """The task ``task_id`` names, if the caller sees it; else -32001 as for a never-held id."""
    record = door.session.store.get(task_id)
    if record is None or not call.ctx.sees(record.owner):
        raise TaskNotFoundError(task_id)
    return record


def get_task(door, call):
    """GetTask: the task as it stands (historyLength is accepted and ignored)."""
    return RawJSON(door.session.store.wire(visible(door, call, required_id(call))))


def cancel_task(door, call):
    """CancelTask: CANCELED with a residue artifact, or -32002 for a task that ended."""
    record = visible(door, call, required_id(call))
    if not door.session.manager.cancel(record):
        raise TaskNotCancelableError(record.id, record.state)
    return RawJSON(door.session.store.wire(record))


def _timestamp_us(value) -> int:
    if not isinstance(value, str) or not _RFC3339.match(value):
        raise InvalidParamsError(TIMESTAMP_MESSAGE)
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError:
        raise InvalidParamsError(TIMESTAMP_MESSAGE) from None
    return int(parsed.timestamp()) * 1_000_000 + parsed.microsecond


def read_list_params(params: dict, session_id: str) -> tuple:
    """Read ListTasks' params in the spec's order; the first refused one answers."""
    context_id = params.get("contextId", "")
    if not isinstance(context_id, str):
        raise InvalidParamsError("Invalid params: contextId must be a string")
    status = params.get("status", "TASK_STATE_UNSPECIFIED")
    if not isinstance(status, str) or (status not in ALL_STATES
                                        and status != "TASK_STATE_UNSPECIFIED"):
        raise InvalidParamsError("Invalid params: status must be a TASK_STATE_* name")
    page_size = params.get("pageSize", PAGE_DEFAULT)
    if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
        raise InvalidParamsError("Invalid params: pageSize must be an integer from 1")
    page_size = min(page_size, PAGE_MAX)
    token = params.get("pageToken", "")
    after = None
    if token != "":
        after = decode_token(token, session_id) if isinstance(token, str) else None
        if after is None:
            raise InvalidParamsError("Invalid params: pageToken is not a nextPageToken this "
                                     "door answered")
    cutoff = params.get("statusTimestampAfter")
    cutoff_us = None if cutoff is None else _timestamp_us(cutoff)
    include = params.get("includeArtifacts", False)
    if not isinstance(include, bool):
        raise InvalidParamsError("Invalid params: includeArtifacts must be a boolean")
    state = None if status == "TASK_STATE_UNSPECIFIED" else status
    return context_id or None, state, page_size, after, cutoff_us, include


def list_tasks(door, call):
    """ListTasks: one page, most recently changed first, filters applied afresh."""
    session = door.session
    context_id, state, page_size, after, cutoff_us, include = read_list_params(
        call.params, session.id)
    # A cutoff with microseconds compares with a task's milliseconds exactly.
    cutoff_ms = None if cutoff_us is None else cutoff_us / 1000
    rendered, next_seq, total = session.store.page(
        call.ctx.sees, state, cutoff_ms, context_id, page_size, after,
        lambda record: _listed(record, include))
    body = ",".join(rendered)
    token = "" if next_seq is None else encode_token(next_seq, session.id)
    return RawJSON(f'{{"tasks":[{body}],"nextPageToken":"{token}","pageSize":{page_size},'
                   f'"totalSize":{total}}}')


def _listed(record, include: bool) -> str:
    if not include:
        return record.to_json(artifacts=False)
    if record.artifacts():
        return record.to_json()
    return record.to_json_with_empty_artifacts()
