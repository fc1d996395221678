"""StreamResponse payloads: task, statusUpdate, artifactUpdate, and a message (murmur frames).

Plain functions of plain values, serialized as compact JSON text; every id
(a task's, a message's) is given by the caller, so nothing here holds a session.
"""
from __future__ import annotations

import logging

from murmur_wsgi.uris import STREAM_URI
from murmur_wsgi.wire.encode import compact_ascii
from murmur_wsgi.wire.task import rfc3339

logger = logging.getLogger(__name__)


def stream_part(text: str) -> dict:
    return {"mediaType": "text/plain", "text": text}


def task_event(task_json: str) -> str:
    """``{"task": …}`` around a Task already serialized."""
    return f'{{"task":{task_json}}}'


def status_update(task_id: str, context_id: str, task_status: dict, dumps=compact_ascii) -> str:
    """``{"statusUpdate": …}`` carrying a TaskStatus as built (``wire.task.status``).

    ``dumps``: the encoder (the door's escapes non-ASCII; the hub passes its own).
    """
    return dumps({"statusUpdate": {"taskId": task_id, "contextId": context_id,
                                   "status": task_status}})


def status_now(task_id: str, context_id: str, state: str, text: str | None, ms: int,
               message_id: str) -> str:
    """``{"statusUpdate": …}`` of a status as it happens, with ``text`` as its message."""
    task_status = {"state": state}
    if text is not None:
        task_status["message"] = {"messageId": message_id, "contextId": context_id,
                                  "taskId": task_id, "role": "ROLE_AGENT",
                                  "parts": [stream_part(text)]}
    task_status["timestamp"] = rfc3339(ms)
    return status_update(task_id, context_id, task_status)


def artifact_update(task_id: str, context_id: str, artifact: dict, append: bool = False,
                    last_chunk: bool = True, dumps=compact_ascii) -> str:
    """``{"artifactUpdate": …}``: a whole artifact (the default), or one chunk of it."""
    return dumps({"artifactUpdate": {"taskId": task_id, "contextId": context_id,
                                     "artifact": artifact, "append": append,
                                     "lastChunk": last_chunk}})


def frame(name: str, text: str, fields: dict | None, message_id: str,
          task_id: str | None = None, context_id: str | None = None) -> str:
    """A murmur frame: a ROLE_AGENT message whose metadata carries the frame under the URI."""
    meta = {"frame": name}
    if fields:
        meta.update(fields)
        # NOTE: an agent's fields (a harness's quota line) never rename the frame: a
        # "frame" among them would pass the frame off as the door's (gap, capsule-closed).
        meta["frame"] = name
    message = {"messageId": message_id}
    if task_id is not None:
        message["contextId"] = context_id
        message["taskId"] = task_id
    message["role"] = "ROLE_AGENT"
    message["parts"] = [stream_part(text)]
    message["metadata"] = {STREAM_URI: meta}
    return compact_ascii({"message": message})
