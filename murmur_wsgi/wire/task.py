"""Task and artifact: the task states and the builders of a Task's ProtoJSON form.

Plain functions of plain values (no record, no session): the door's
``TaskRecord`` and the hub's tasks build their Task JSON with them.
"""
from __future__ import annotations

import logging
import time
from json.encoder import encode_basestring_ascii

logger = logging.getLogger(__name__)

SUBMITTED = "TASK_STATE_SUBMITTED"
WORKING = "TASK_STATE_WORKING"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
COMPLETED = "TASK_STATE_COMPLETED"
FAILED = "TASK_STATE_FAILED"
CANCELED = "TASK_STATE_CANCELED"
REJECTED = "TASK_STATE_REJECTED"
AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

TERMINAL = frozenset({COMPLETED, FAILED, CANCELED, REJECTED})
# A held SendMessage is answered once its task is in one of these.
SETTLED = TERMINAL | {INPUT_REQUIRED}
ALL_STATES = frozenset({SUBMITTED, WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELED,
                        REJECTED, AUTH_REQUIRED})

_second: tuple = (None, "")   # PERF: the last second formatted; most stamps share it
_MILLIS = tuple(f".{millis:03d}Z" for millis in range(1000))   # PERF: each written once


def rfc3339(ms: int) -> str:
    """Format epoch milliseconds as RFC 3339 UTC with milliseconds and Z."""
    global _second
    secs, millis = divmod(ms, 1000)
    cached = _second                # NOTE: one tuple, swapped whole: safe across threads
    if cached[0] != secs:
        cached = _second = (secs, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)))
    return cached[1] + _MILLIS[millis]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def text_part(text: str) -> dict:
    return {"text": text, "mediaType": "text/plain"}


def data_part(value) -> dict:
    return {"data": value, "mediaType": "application/json"}


def agent_message(message_id: str, context_id: str, task_id: str | None, text: str) -> dict:
    """A ROLE_AGENT message with one text part (a status message, a frame's carrier)."""
    msg = {"messageId": message_id, "contextId": context_id}
    if task_id is not None:
        msg["taskId"] = task_id
    msg["role"] = "ROLE_AGENT"
    msg["parts"] = [text_part(text)]
    return msg


def artifact(artifact_id: str, parts: list, name: str | None = None) -> dict:
    """An Artifact: its id, its name (the id when not given), its parts."""
    return {"artifactId": artifact_id, "name": artifact_id if name is None else name,
            "parts": parts}


def status(state: str, timestamp: str, message: dict | None = None) -> dict:
    """A TaskStatus: the state, the status message when there is one, the timestamp."""
    out = {"state": state}
    if message is not None:
        out["message"] = message
    out["timestamp"] = timestamp
    return out


def task(task_id: str, context_id: str, task_status: dict, artifacts: list | None = None,
         metadata: dict | None = None, *, history: list | None = None) -> dict:
    """A Task as GetTask answers it; ``artifacts``, ``history`` or ``metadata`` None leaves
    the key out (the door keeps no history; the hub's task holds its message)."""
    out = {"id": task_id, "contextId": context_id, "status": task_status}
    if artifacts is not None:
        out["artifacts"] = artifacts
    if history is not None:
        out["history"] = history
    if metadata is not None:
        out["metadata"] = metadata
    return out


_str = encode_basestring_ascii     # one JSON string, as the door's encoder writes it (ASCII)


def text_task_json(task_id: str, context_id: str, state: str, timestamp: str,
                   status_text: str | None = None, artifact: tuple | None = None) -> str:
    """A Task whose status message and artifact are text only, serialized without the encoder.

    The same text as ``task()`` of ``status()``, ``agent_message()`` (its id
    ``msg_<task id>_status``) and ``artifact()`` of one ``text_part`` through the
    door's encoder (compact, ASCII): ``tests/shared/test_wire_task.py`` checks it. PERF: a
    quarter of the time; every held SendMessage's answer and first GetTask is one.
    ``artifact``: ``(name, text)``, an artifact named as its id; None leaves it out.
    """
    ctx = _str(context_id)
    tid = _str(task_id)
    out = f'{{"id":{tid},"contextId":{ctx},"status":{{"state":{_str(state)}'
    if status_text is not None:
        out += (f',"message":{{"messageId":{_str(f"msg_{task_id}_status")},"contextId":{ctx},'
                f'"taskId":{tid},"role":"ROLE_AGENT","parts":[{{"text":{_str(status_text)},'
                f'"mediaType":"text/plain"}}]}}')
    out += f',"timestamp":{_str(timestamp)}}}'
    if artifact is not None:
        name = _str(artifact[0])
        out += (f',"artifacts":[{{"artifactId":{name},"name":{name},"parts":[{{"text":'
                f'{_str(artifact[1])},"mediaType":"text/plain"}}]}}]')
    return out + "}"


def list_tasks_response(tasks_json: str, next_token: str, page_size: int, total: int) -> str:
    """A ListTasksResponse around its tasks, already serialized and joined by commas."""
    return f'{{"tasks":[{tasks_json}{_list_tail(next_token, page_size, total)}'


def list_tasks_response_pieces(tasks: list[str], next_token: str, page_size: int,
                               total: int) -> list[str]:
    """The same ListTasksResponse as texts to write one after the other (the tasks' own)."""
    pieces = ['{"tasks":[']
    for task in tasks:
        pieces += (task, ",")
    if tasks:
        pieces.pop()                    # the last task's comma
    pieces.append(_list_tail(next_token, page_size, total))
    return pieces


def _list_tail(next_token: str, page_size: int, total: int) -> str:
    return f'],"nextPageToken":"{next_token}","pageSize":{page_size},"totalSize":{total}}}'

