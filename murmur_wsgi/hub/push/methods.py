"""The *TaskPushNotificationConfig methods, and SendMessage's ``taskPushNotificationConfig``.

Scoped like every method to the caller's tenant and the agent in the path:
another tenant's or agent's task is -32001. Create's answer alone carries
the config's key (``authentication.credentials``, scheme Bearer); Get and
List carry the token, never the key, and ``deliveryStatus`` (the hub's
extension): ``{failures, disabled, disabledAt?, lastError?}``.
"""
from __future__ import annotations

import base64
import binascii
import logging
from dataclasses import replace

from murmur_wsgi.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from murmur_wsgi.hub.push.rules import read_config
from murmur_wsgi.hub.store.push_base import MAX_CONFIGS_PER_TASK, TASK_GONE, PushRecord
from murmur_wsgi.wire.task import rfc3339

logger = logging.getLogger(__name__)


def render(record: PushRecord, key: str | None = None, status: bool = True) -> dict:
    """The config as A2A TaskPushNotificationConfig (proto field order)."""
    out = {"id": record.id, "taskId": record.task_id, "url": record.url}
    if record.token is not None:
        out["token"] = record.token
    auth = {"scheme": "Bearer"}
    if key is not None:
        auth["credentials"] = key
    out["authentication"] = auth
    if status:
        delivery = {"failures": record.failures, "disabled": record.disabled}
        if record.disabled_ms is not None:
            delivery["disabledAt"] = rfc3339(record.disabled_ms)
        if record.last_error is not None:
            delivery["lastError"] = record.last_error
        out["deliveryStatus"] = delivery
    return out


def _string(params: dict, name: str, required: bool = True) -> str:
    value = params.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise InvalidParamsError(f"Invalid params: {name} must be a non-empty string")
    return value


def _params(call) -> dict:
    return call.params


def _task(hub, call, task_id: str) -> None:
    """-32001 unless the task is the caller's tenant's, of the agent in the path (its
    record is not read: ``owns``)."""
    if not hub.store.owns(call.tenant, call.agent, task_id):
        raise TaskNotFoundError(task_id)


def _save(hub, call, request, from_start: bool) -> PushRecord | str:
    record = PushRecord(call.tenant, call.agent, request.task_id, request.id, request.url,
                        request.token)
    saved = hub.stores.push.push_save(record, from_start)
    if saved is None:
        raise InvalidParamsError(f"Invalid params: a task has at most {MAX_CONFIGS_PER_TASK} "
                                 "push configs; delete one first")
    return saved


def create_config(hub, call):
    """CreateTaskPushNotificationConfig: save or replace; the key in this answer only."""
    push = hub.push
    request = read_config(call.params, push.ports, push.allow)
    _task(hub, call, request.task_id)
    saved = _save(hub, call, request, from_start=False)
    if saved is TASK_GONE:                      # forgotten since it was found
        raise TaskNotFoundError(request.task_id)
    return render(saved, key=push.key(saved), status=False)


def get_config(hub, call):
    params = _params(call)
    task_id, config_id = _string(params, "taskId"), _string(params, "id")
    _task(hub, call, task_id)
    record = hub.stores.push.push_get(call.tenant, call.agent, task_id, config_id)
    if record is None:
        raise InvalidParamsError("Invalid params: the task has no push config with this id")
    return render(record)


def _offset(token: str) -> int:
    if not token:
        return 0
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    if not raw.startswith("p") or not raw[1:].isdigit() or len(raw) > 4:
        raise InvalidParamsError("Invalid params: pageToken is not a nextPageToken this hub "
                                 "answered")
    return int(raw[1:])


def list_configs(hub, call):
    params = _params(call)
    task_id = _string(params, "taskId")
    size = params.get("pageSize")
    # NOTE: the type first: false and 0.0 equal 0, and were served as the default.
    if size is not None and (type(size) is not int or size < 0):
        raise InvalidParamsError("Invalid params: pageSize must be a whole number, 0 or more")
    if not size:
        size = MAX_CONFIGS_PER_TASK
    start = _offset(_string(params, "pageToken", required=False))
    _task(hub, call, task_id)
    records = hub.stores.push.push_list(call.tenant, call.agent, task_id)
    page = records[start:start + size]
    more = start + size < len(records)
    token = base64.urlsafe_b64encode(f"p{start + size}".encode()).decode().rstrip("=") \
        if more else ""
    return {"configs": [render(r) for r in page], "nextPageToken": token}


def delete_config(hub, call):
    params = _params(call)
    task_id, config_id = _string(params, "taskId"), _string(params, "id")
    _task(hub, call, task_id)
    if not hub.stores.push.push_delete(call.tenant, call.agent, task_id, config_id):
        raise InvalidParamsError("Invalid params: the task has no push config with this id")
    return {}


def message_config(hub, raw):
    """SendMessage's ``configuration.taskPushNotificationConfig``, read before admission:
    None when absent, -32004 on a hub without push, -32602 when not accepted."""
    if raw is None:
        return None
    push = hub.push
    if push is None:
        raise UnsupportedOperationError("push notifications are not enabled on this hub")
    return read_config(raw, push.ports, push.allow,
                       where="configuration.taskPushNotificationConfig.", task_id="")


def save_message_config(hub, call, request, task_id: str, from_start: bool) -> None:
    """Save SendMessage's config for its task (before the run starts: from SUBMITTED).

    None saved when the task is already forgotten (a refusal past its tenant's cap):
    it has nothing left to tell."""
    _save(hub, call, replace(request, task_id=task_id), from_start)


METHODS = {
    "CreateTaskPushNotificationConfig": create_config,
    "GetTaskPushNotificationConfig": get_config,
    "ListTaskPushNotificationConfigs": list_configs,
    "DeleteTaskPushNotificationConfig": delete_config,
}
