"""A task's record: its states, its fields, and its wire form (cached until it changes)."""
from __future__ import annotations

import json
import logging
import time

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

# murmur's word for each state: the spelling off the wire (trace, referenced tasks).
WORDS = {SUBMITTED: "submitted", WORKING: "working", INPUT_REQUIRED: "input-required",
         COMPLETED: "completed", FAILED: "failed", CANCELED: "canceled", REJECTED: "rejected"}

_dumps = json.JSONEncoder(separators=(",", ":")).encode


_second: tuple = (None, "")   # PERF: the last second formatted; most stamps share it


def rfc3339(ms: int) -> str:
    """Format epoch milliseconds as RFC 3339 UTC with milliseconds and Z."""
    global _second
    secs, millis = divmod(ms, 1000)
    cached = _second                # NOTE: one tuple, swapped whole: safe across threads
    if cached[0] != secs:
        cached = _second = (secs, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)))
    return f"{cached[1]}.{millis:03d}Z"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def text_part(text: str) -> dict:
    return {"text": text, "mediaType": "text/plain"}


def agent_message(message_id: str, context_id: str, task_id: str | None, text: str) -> dict:
    """A ROLE_AGENT message with one text part (a status message, a frame's carrier)."""
    msg = {"messageId": message_id, "contextId": context_id}
    if task_id is not None:
        msg["taskId"] = task_id
    msg["role"] = "ROLE_AGENT"
    msg["parts"] = [text_part(text)]
    return msg


class TaskRecord:
    """One task the session holds.

    Fields change only under the store's lock (``TaskStore.change``); the
    wire form is built once per change and reused by every read.
    """

    __slots__ = ("id", "context_id", "owner", "trust", "origin", "state", "status_text",
                 "changed_ms", "response", "prompt", "residue", "running", "seq",
                 "_json", "_json_bare", "runtime", "finished_at", "echoes",
                 "agent_artifacts", "usage")

    def __init__(self, task_id: str, context_id: str, owner: str | None = None,
                 trust: str = "untrusted", origin: str | None = None):
        self.id = task_id
        self.context_id = context_id
        self.owner = owner                 # credential that started it; None: the session
        self.trust = trust
        self.origin = origin
        self.state = SUBMITTED
        self.status_text: str | None = None
        self.changed_ms = now_ms()
        self.response: str | None = None
        self.prompt: str | None = None
        self.residue: list | None = None   # residue items, on a canceled task
        self.running: list | None = None   # metadata.murmur.runningCommands
        self.seq = 0                       # position in "most recently changed first"
        self._json: str | None = None
        self._json_bare: str | None = None
        self.runtime = None                # the live task's runtime; None once it ended
        self.finished_at: float | None = None
        self.echoes: tuple = ()            # render.echo_marks of the references block it got
        self.agent_artifacts: list | None = None  # the agent's named artifacts, in order
        self.usage = None                  # agents.usage.RunUsage once the agent reported any

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def timestamp(self) -> str:
        return rfc3339(self.changed_ms)

    def status_message(self) -> dict | None:
        if self.status_text is None:
            return None
        return agent_message(f"msg_{self.id}_status", self.context_id, self.id, self.status_text)

    def artifacts(self) -> list:
        """Every artifact: the agent's named ones, then the door's (``door_artifacts``)."""
        if self.agent_artifacts:
            return self.agent_artifacts + self.door_artifacts()
        return self.door_artifacts()

    def door_artifacts(self) -> list:
        """The reference's artifacts: ``response``, ``prompt``, ``residue``."""
        out = []
        if self.response is not None and self.state == COMPLETED:
            out.append({"artifactId": "response", "name": "response",
                        "parts": [text_part(self.response)]})
        if self.prompt is not None and self.state == INPUT_REQUIRED:
            out.append({"artifactId": "prompt", "name": "prompt",
                        "parts": [text_part(self.prompt)]})
        if self.residue:
            out.append({"artifactId": "residue", "name": "residue",
                        "parts": [{"data": item, "mediaType": "application/json"}
                                  for item in self.residue]})
        return out

    def status(self) -> dict:
        status = {"state": self.state}
        message = self.status_message()
        if message is not None:
            status["message"] = message
        status["timestamp"] = self.timestamp
        return status

    def to_dict(self, artifacts: bool = True, empty_list: bool = False) -> dict:
        task = {"id": self.id, "contextId": self.context_id, "status": self.status()}
        if artifacts:
            found = self.artifacts()
            if found or empty_list:
                task["artifacts"] = found
        if self.running and self.terminal:
            task["metadata"] = {"murmur": {"runningCommands": self.running}}
        return task

    def to_json(self, artifacts: bool = True, cache: bool = True) -> str:
        """Return the task as GetTask answers it (cached until the next change).

        ``cache=False`` serializes without keeping the text: for the one answer
        a held request gets, so a finished task nobody reads holds no copy.
        """
        # PERF: a read of an unchanged task costs one attribute lookup.
        if not cache and self._json is None:
            return _dumps(self.to_dict(artifacts))
        if artifacts:
            if self._json is None:
                self._json = _dumps(self.to_dict(True))
            return self._json
        if self._json_bare is None:
            if (self.response is None and self.prompt is None and not self.residue
                    and not self.agent_artifacts):
                return self.to_json(True)
            self._json_bare = _dumps(self.to_dict(False))
        return self._json_bare

    def to_json_with_empty_artifacts(self) -> str:
        """ListTasks with includeArtifacts: ``artifacts`` present even when it is []."""
        return _dumps(self.to_dict(True, empty_list=True))

    def touch(self) -> None:
        """Forget the cached wire form; called by the store on every change."""
        self._json = None
        self._json_bare = None
