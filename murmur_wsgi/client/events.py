"""A stream's events, parsed: what a door's ``data:`` line says, in one object.

Every event the door writes is a JSON-RPC response whose result is an A2A
v1.0 StreamResponse with one member: ``task``, ``message``, ``statusUpdate``
or ``artifactUpdate``. A murmur frame is a ``message`` whose metadata holds
``{"frame": name, ...}`` under the stream extension's URI (DECISIONS §3).
"""
from __future__ import annotations

import itertools
import json
import logging
from dataclasses import dataclass, field

from murmur_wsgi.uris import STREAM_URI
from murmur_wsgi.wire.task import INPUT_REQUIRED, TERMINAL  # noqa: F401 - re-exported for the client

logger = logging.getLogger(__name__)

KINDS = ("task", "message", "statusUpdate", "artifactUpdate")
KEY_SHOWN = 40                  # the characters an error shows of a key it names

# murmur's word for each state: what a person reads.
WORDS = {"TASK_STATE_SUBMITTED": "submitted", "TASK_STATE_WORKING": "working",
         "TASK_STATE_INPUT_REQUIRED": "input-required", "TASK_STATE_COMPLETED": "completed",
         "TASK_STATE_FAILED": "failed", "TASK_STATE_CANCELED": "canceled",
         "TASK_STATE_REJECTED": "rejected", "TASK_STATE_AUTH_REQUIRED": "auth-required"}
STATES = {word: state for state, word in WORDS.items()}


def state_word(state: str | None) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` -> ``input-required``."""
    if not isinstance(state, str) or not state:
        return "unknown"
    return WORDS.get(state, state.lower())


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def _object(value) -> dict:
    return value if isinstance(value, dict) else {}


def part_text(part) -> str | None:
    """A part as a person reads it: its text, a data part as compact JSON, else None."""
    if not isinstance(part, dict):
        return None
    if isinstance(part.get("text"), str):
        return part["text"]
    if "data" in part:
        return json.dumps(part["data"], ensure_ascii=False, separators=(",", ":"))
    return None


def parts_text(parts) -> str:
    """The text and data parts of ``parts`` joined by newlines (data parts as JSON)."""
    if not isinstance(parts, list):
        return ""
    return "\n".join(t for t in (part_text(p) for p in parts) if t is not None)


def artifact_text(task: dict, artifact_id: str) -> str | None:
    """The text of the task's artifact ``artifact_id`` (response, prompt), or None."""
    artifacts = task.get("artifacts")
    for artifact in artifacts if isinstance(artifacts, list) else []:
        if isinstance(artifact, dict) and artifact.get("artifactId") == artifact_id:
            return parts_text(artifact.get("parts"))
    return None


def status_text(status: dict | None) -> str:
    """The text of a status's message, "" when it says nothing."""
    if not isinstance(status, dict) or not isinstance(status.get("message"), dict):
        return ""
    return parts_text(status["message"].get("parts"))


@dataclass
class StreamEvent:
    """One event of a stream.

    ``kind`` is the StreamResponse member (``task``, ``message``,
    ``statusUpdate``, ``artifactUpdate``); ``payload`` its value; ``id`` the
    SSE id (None for unnumbered events: connection-ack, gap, lagged,
    capsule-closed, a rejected task). ``frame`` names a murmur frame and
    ``fields`` holds its fields. ``synthetic`` is true for an event the
    client made up to report what it saw (a gap it detected, the final task
    it fetched after a reconnect found the task ended).
    """

    kind: str
    payload: dict
    id: int | None = None
    frame: str | None = None
    fields: dict = field(default_factory=dict)
    synthetic: bool = False

    @classmethod
    def from_result(cls, result: dict, event_id: int | None = None) -> StreamEvent:
        kind = next((k for k in KINDS if k in result), None)
        if kind is None or not isinstance(result[kind], dict):
            # NOTE: named by a few of its keys, each cut: the whole result's repr was the
            # error's text (tens of MB of one line for a large event of another shape).
            if kind is not None:
                raise ValueError(f"a StreamResponse whose {kind} is not an object")
            keys = ", ".join(repr(str(k)[:KEY_SHOWN]) for k in itertools.islice(result, 5))
            raise ValueError(f"a StreamResponse with none of {', '.join(KINDS)}: "
                             + (f"its keys are {keys}" if keys else "it is empty"))
        payload = result[kind]
        frame, fields = None, {}
        if kind == "message":
            meta = _object(payload.get("metadata")).get(STREAM_URI)
            if isinstance(meta, dict) and isinstance(meta.get("frame"), str):
                frame = meta["frame"]
                fields = {k: v for k, v in meta.items() if k != "frame"}
        return cls(kind, payload, event_id, frame, fields)

    @property
    def task_id(self) -> str | None:
        """The task's id (a text; anything else a server wrote there is None)."""
        if self.kind == "task":
            return _text(self.payload.get("id"))
        return _text(self.payload.get("taskId"))

    @property
    def context_id(self) -> str | None:
        return _text(self.payload.get("contextId"))

    @property
    def status(self) -> dict | None:
        if self.kind in ("task", "statusUpdate") and isinstance(self.payload.get("status"),
                                                                dict):
            return self.payload["status"]
        return None

    @property
    def state(self) -> str | None:
        """The task state this event reports (a text), or None."""
        return _text((self.status or {}).get("state"))

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def text(self) -> str:
        """What a person reads: a status's or frame's text, an artifact's parts."""
        if self.kind == "message":
            return parts_text(self.payload.get("parts"))
        if self.kind == "artifactUpdate":
            return parts_text(_object(self.payload.get("artifact")).get("parts"))
        return status_text(self.status)

    def as_result(self) -> dict:
        """The StreamResponse, as the door wrote it."""
        return {self.kind: self.payload}


def gap_event(first_available_id: int | None, after_id: int | None) -> StreamEvent:
    """A gap the client detected: events after ``after_id`` up to the given id are lost."""
    if first_available_id is None:
        text = f"gap: events after {after_id} may be lost"
    else:
        text = f"gap: events before {first_available_id} are no longer held"
    payload = {"role": "ROLE_AGENT", "parts": [{"text": text, "mediaType": "text/plain"}]}
    return StreamEvent("message", payload, None, "gap",
                       {"firstAvailableId": first_available_id, "afterId": after_id},
                       synthetic=True)
