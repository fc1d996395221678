"""The StreamResponse payloads the door writes: A2A events and murmur frames."""
from __future__ import annotations

import json
import logging

from murmur_wsgi.session.ids import new_id
from murmur_wsgi.tasks.record import now_ms, rfc3339
from murmur_wsgi.uris import STREAM_URI

logger = logging.getLogger(__name__)

_dumps = json.JSONEncoder(separators=(",", ":")).encode


def stream_part(text: str) -> dict:
    return {"mediaType": "text/plain", "text": text}


def task_event(record) -> str:
    """``{"task": …}``: the task as GetTask answers it."""
    return f'{{"task":{record.to_json()}}}'


def status_update(record, text: str | None = None, *, from_record: bool = False) -> str:
    """``{"statusUpdate": …}``: the task's recorded status, or a status written now.

    ``from_record``: the status as GetTask reports it (a terminal status).
    Otherwise a status as it happens, carrying ``text`` when given, stamped now.
    """
    if from_record:
        status = record.status()
    else:
        status = {"state": record.state}
        if text is not None:
            status["message"] = {"messageId": new_id("msg"), "contextId": record.context_id,
                                  "taskId": record.id, "role": "ROLE_AGENT",
                                  "parts": [stream_part(text)]}
        status["timestamp"] = rfc3339(now_ms())
    return _dumps({"statusUpdate": {"taskId": record.id, "contextId": record.context_id,
                                    "status": status}})


def artifact_update(record, artifact: dict) -> str:
    """``{"artifactUpdate": …}``: one whole artifact (lastChunk true)."""
    return _dumps({"artifactUpdate": {"taskId": record.id, "contextId": record.context_id,
                                      "artifact": artifact, "append": False,
                                      "lastChunk": True}})


def frame(name: str, text: str, fields: dict | None = None, record=None) -> str:
    """A murmur frame: a ROLE_AGENT message whose metadata carries the frame under the URI."""
    meta = {"frame": name}
    if fields:
        meta.update(fields)
    message = {"messageId": new_id("msg")}
    if record is not None:
        message["contextId"] = record.context_id
        message["taskId"] = record.id
    message["role"] = "ROLE_AGENT"
    message["parts"] = [stream_part(text)]
    message["metadata"] = {STREAM_URI: meta}
    return _dumps({"message": message})


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
