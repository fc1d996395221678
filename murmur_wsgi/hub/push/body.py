"""What one notification carries: an A2A StreamResponse of at most 64 KiB.

The creation is the Task (SUBMITTED) as stored, every status change its
statusUpdate, and the final state the Task without its history (id,
contextId, final status, artifacts). Artifact chunks are not sent. A final
Task over the limit goes without artifacts and with metadata
``{"nexus.artifactsOmitted": true}`` (the text's key, so receivers written
for it work), and without its status message too if it still does not fit;
a creation over it goes without history, a status change without its status
message.
"""
from __future__ import annotations

import json
import logging

from murmur_wsgi.wire.encode import compact_utf8
from murmur_wsgi.wire.stream import task_event

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
OMITTED = {"nexus.artifactsOmitted": True}


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def final_body(store, task) -> bytes:
    """The final Task, without history; without artifacts (flagged) when it does not fit.

    PERF: a task read final whose artifacts cannot fit is never rendered with them: each
    config's final body of a 59 MB answer took 0.2 s of the worker's CPU, its other
    greenlets waiting, and 177 MB at its peak, to be dropped."""
    # NOTE: a task read final is rendered as read: it changes no more (a shared store read
    # its record again for each render: 0.17 s of a worker's CPU for a 59 MB answer).
    final = task.terminal
    if not (final and task.artifacts_at_least() > MAX_BODY_BYTES):
        body = _bytes(task_event(store.render(task, 0, as_read=final)))
        if len(body) <= MAX_BODY_BYTES:
            return body
    slim = json.loads(store.render(task, 0, artifacts=False, as_read=final))
    slim["metadata"] = {**(slim.get("metadata") or {}), **OMITTED}
    body = _bytes(task_event(compact_utf8(slim)))
    if len(body) <= MAX_BODY_BYTES:
        return body
    slim["status"].pop("message", None)     # a long failure's text: like a status change's
    return _bytes(task_event(compact_utf8(slim)))


def event_body(store, task, event) -> bytes | None:
    """The body of one stored event, or None when the event is not notified."""
    if event.terminal:
        return final_body(store, task)
    payload = event.payload
    if payload.startswith('{"artifactUpdate"'):
        return None
    body = _bytes(payload)
    if len(body) <= MAX_BODY_BYTES:
        return body
    value = json.loads(payload)
    if "task" in value:
        value["task"].pop("history", None)
    elif "statusUpdate" in value:
        value["statusUpdate"]["status"].pop("message", None)
    return _bytes(compact_utf8(value))
