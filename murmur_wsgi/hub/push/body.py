"""What one notification carries: an A2A StreamResponse of at most 64 KiB.

The creation is the Task (SUBMITTED) as stored, every status change its
statusUpdate, and the final state the Task without its history (id,
contextId, final status, artifacts). Artifact chunks are not sent. A final
Task over the limit goes without artifacts and with metadata
``{"nexus.artifactsOmitted": true}`` (the text's key, so receivers written
for it work); a creation over it goes without history, a status change
without its status message.
"""
from __future__ import annotations

import json
import logging

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
OMITTED = {"nexus.artifactsOmitted": True}
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _encode(value) -> bytes:
    return _dumps(value).encode("utf-8", "surrogatepass")


def final_body(store, task) -> bytes:
    """The final Task, without history; without artifacts (flagged) when it does not fit."""
    body = f'{{"task":{store.render(task, 0)}}}'.encode("utf-8", "surrogatepass")
    if len(body) <= MAX_BODY_BYTES:
        return body
    slim = json.loads(store.render(task, 0, artifacts=False))
    slim["metadata"] = {**(slim.get("metadata") or {}), **OMITTED}
    return _encode({"task": slim})


def event_body(store, task, event) -> bytes | None:
    """The body of one stored event, or None when the event is not notified."""
    if event.terminal:
        return final_body(store, task)
    payload = event.payload
    if payload.startswith('{"artifactUpdate"'):
        return None
    body = payload.encode("utf-8", "surrogatepass")
    if len(body) <= MAX_BODY_BYTES:
        return body
    value = json.loads(payload)
    if "task" in value:
        value["task"].pop("history", None)
    elif "statusUpdate" in value:
        value["statusUpdate"]["status"].pop("message", None)
    return _encode(value)
