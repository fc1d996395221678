"""GetTask, ListTasks, CancelTask."""
from __future__ import annotations

import logging

from murmur_wsgi.errors import InvalidParamsError, TaskNotFoundError
from murmur_wsgi.wire.raw import RawJSON

logger = logging.getLogger(__name__)


def visible(door, call, task_id):
    """The task ``task_id`` names, if the caller sees it; else -32001."""
    record = door.session.store.get(task_id)
    if record is None or not call.ctx.sees(record.owner):
        raise TaskNotFoundError(task_id)
    return record


def get_task(door, call):
    task_id = call.params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParamsError("GetTask requires an id")
    return RawJSON(visible(door, call, task_id).to_json())


def list_tasks(door, call):
    raise InvalidParamsError("ListTasks is not served yet")


def cancel_task(door, call):
    task_id = call.params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParamsError("CancelTask requires an id")
    visible(door, call, task_id)
    raise InvalidParamsError("CancelTask is not served yet")
