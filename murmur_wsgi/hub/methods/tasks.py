"""GetTask, ListTasks, CancelTask: a tenant's tasks of the agent in the path."""
from __future__ import annotations

import logging
import time

from murmur_wsgi.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError
from murmur_wsgi.hub.message import history_length
from murmur_wsgi.wire.params import read_task_id, read_timestamp_us
from murmur_wsgi.wire.raw import RawJSON
from murmur_wsgi.wire.task import ALL_STATES, list_tasks_response

logger = logging.getLogger(__name__)

PAGE_DEFAULT = 50
PAGE_MAX = 100
LIST_HISTORY_DEFAULT = 100


def find(hub, call):
    """The task params.id names, of this tenant's agent in the path; else -32001."""
    task_id = read_task_id(call.params, call.method).id
    task = hub.store.get(call.tenant, call.agent, task_id)
    if task is None:
        raise TaskNotFoundError(task_id)
    return task


def get_task(hub, call):
    """GetTask: the task as it stands, its history trimmed by historyLength."""
    task = find(hub, call)
    return RawJSON(hub.store.render(task, history_length(call.params)))


def cancel_task(hub, call):
    """CancelTask: cut the run, here or on the replica that runs it; CANCELED, or -32002."""
    task = find(hub, call)
    run = hub.runs.get(task.id)
    if task.terminal or (run is None and not hub.store.shared) or (run is not None
                                                                    and run.ended):
        raise TaskNotCancelableError(task.id, task.state)
    if run is not None:
        run.request_stop(cancel=True)
    hub.store.mark_cancel(task.id)          # another replica's run learns it at once
    timeout = hub.config.cancel_timeout_secs
    if run is not None:
        stopped = hub.runs.wait(lambda: run.ended, timeout)
    else:
        stopped = _ended_in_store(hub.store, task.id, timeout)
    task = hub.store.get(call.tenant, call.agent, task.id)
    if not stopped or task.state != "TASK_STATE_CANCELED":
        raise TaskNotCancelableError(task.id, task.state)
    return RawJSON(hub.store.render(task))


def _ended_in_store(store, task_id: str, timeout: float) -> bool:
    """Wait (reading the task's log) until its final event, at most ``timeout``."""
    deadline = time.monotonic() + timeout
    after = 0
    while True:
        left = deadline - time.monotonic()
        events, available = store.events(task_id, after, max(0.0, left))
        if any(event.terminal for event in events):
            return True
        if not available or left <= 0:
            return False
        if events:
            after = events[-1].seq


def _read_list(params: dict):
    context_id = params.get("contextId", "")
    if not isinstance(context_id, str):
        raise InvalidParamsError("Invalid params: contextId must be a string")
    status = params.get("status", "TASK_STATE_UNSPECIFIED")
    if not isinstance(status, str) or (status not in ALL_STATES
                                        and status != "TASK_STATE_UNSPECIFIED"):
        raise InvalidParamsError("Invalid params: status must be a TASK_STATE_* name")
    page_size = params.get("pageSize", PAGE_DEFAULT)
    if page_size is None:
        page_size = PAGE_DEFAULT
    if not isinstance(page_size, int) or isinstance(page_size, bool) \
            or not 1 <= page_size <= PAGE_MAX:
        raise InvalidParamsError(f"Invalid params: pageSize must be from 1 to {PAGE_MAX}")
    token = params.get("pageToken", "") or ""
    if not isinstance(token, str):
        raise InvalidParamsError("Invalid params: pageToken must be a string")
    cutoff = params.get("statusTimestampAfter")
    cutoff_ms = None if cutoff is None else read_timestamp_us(cutoff) / 1000
    include = params.get("includeArtifacts", False)
    if include is None:
        include = False
    if not isinstance(include, bool):
        raise InvalidParamsError("Invalid params: includeArtifacts must be a boolean")
    length = history_length(params)
    state = None if status == "TASK_STATE_UNSPECIFIED" else status
    return (context_id or None, state, page_size, token or None, cutoff_ms, include,
            LIST_HISTORY_DEFAULT if length is None else length)


def list_tasks(hub, call):
    """ListTasks: newest first, scoped to the tenant and the agent in the path."""
    context_id, state, page_size, token, cutoff_ms, include, length = _read_list(call.params)
    try:
        page = hub.store.list(call.tenant, call.agent, context_id=context_id, state=state,
                              after_ms=cutoff_ms, page_size=page_size, token=token)
    except ValueError:
        raise InvalidParamsError("Invalid params: pageToken is not a nextPageToken this hub "
                                 "answered") from None
    body = ",".join(hub.store.render(task, length, include) for task in page.tasks)
    return RawJSON(list_tasks_response(body, page.next_token, page_size, page.total))
