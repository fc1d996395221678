"""A task's record: its fields, and its wire form (built by ``wire/task.py``, cached)."""
from __future__ import annotations

import logging
from sys import getsizeof

from murmur_wsgi.agents.usage import MODEL_BYTES
from murmur_wsgi.wire import task as wire_task
from murmur_wsgi.wire.encode import compact_ascii as _dumps
from murmur_wsgi.wire.task import (ALL_STATES, AUTH_REQUIRED, CANCELED, COMPLETED,  # noqa: F401
                                   FAILED, INPUT_REQUIRED, REJECTED, SETTLED, SUBMITTED,
                                   TERMINAL, WORKING, agent_message, now_ms, rfc3339,
                                   text_part)

logger = logging.getLogger(__name__)

# murmur's word for each state: the spelling off the wire (trace, referenced tasks).
WORDS = {SUBMITTED: "submitted", WORKING: "working", INPUT_REQUIRED: "input-required",
         COMPLETED: "completed", FAILED: "failed", CANCELED: "canceled", REJECTED: "rejected"}


# MEMORY: what a kept part costs beside its JSON (its dict and its place in the list;
# measured: 245 bytes for {"text":""}, whose JSON is 11), and a kept artifact beside its
# JSON and its parts' (its dicts, its parts' list, its id and name; measured: about 800).
PART_BYTES = 240
ARTIFACT_BYTES = 700


def _held(text: str) -> int:
    """A text's size as ``TaskRecord.size`` counts it (both O(1) but for isascii)."""
    return len(text) if text.isascii() else getsizeof(text)


class TaskRecord:
    """One task the session holds.

    Fields change only under the store's lock (``TaskStore.change``); the
    wire form is built once per change and reused by every read.
    """

    __slots__ = ("id", "context_id", "owner", "trust", "origin", "state", "status_text",
                 "changed_ms", "response", "prompt", "residue", "running", "seq",
                 "_json", "_json_bare", "runtime", "finished_at", "echoes",
                 "agent_artifacts", "usage", "held_size")

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
        # the agent's named artifacts by id, in the order they were first written
        self.agent_artifacts: dict[str, dict] | None = None
        self.usage = None                  # agents.usage.RunUsage once the agent reported any
        self.held_size = 0                 # size() when it finished: what retention counts

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
            return [*self.agent_artifacts.values(), *self.door_artifacts()]
        return self.door_artifacts()

    def door_artifacts(self) -> list:
        """The reference's artifacts: ``response``, ``prompt``, ``residue``."""
        out = []
        if self.response is not None and self.state == COMPLETED:
            out.append(wire_task.artifact("response", [text_part(self.response)]))
        if self.prompt is not None and self.state == INPUT_REQUIRED:
            out.append(wire_task.artifact("prompt", [text_part(self.prompt)]))
        if self.residue:
            out.append(wire_task.artifact("residue", [wire_task.data_part(item)
                                                      for item in self.residue]))
        return out

    def size(self) -> int:
        """What a finished task holds: its ids, status message, answer, prompt,
        artifacts (as JSON) and the models its usage names, and the wire forms it has
        cached. ``tasks.keep_finished_bytes`` bounds their sum.

        MEMORY: an artifact counts ``ARTIFACT_BYTES`` and each of its parts ``PART_BYTES``
        beside their JSON, a model ``MODEL_BYTES`` beside its name; an ASCII text counts
        its characters, any other its memory (up to 4 bytes a character, for all of them
        once one is outside the basic plane). A cached wire form holds every text once
        more, escaped: up to 12 characters for one.
        """
        size = _held(self.id) + _held(self.context_id)
        for text in (self.status_text, self.response, self.prompt):
            if isinstance(text, str):
                size += _held(text)
        if self.usage is not None:
            size += sum(map(_held, self.usage.models)) + MODEL_BYTES * len(self.usage.by_model)
        if self.agent_artifacts or self.residue or self.running:
            named = list(self.agent_artifacts.values()) if self.agent_artifacts else None
            size += len(_dumps([named, self.residue, self.running]))
            if named:
                size += ARTIFACT_BYTES * len(named) + \
                    PART_BYTES * sum(len(artifact["parts"]) for artifact in named)
        full, bare = self._json, self._json_bare
        if full is not None:
            size += len(full)
        if bare is not None and bare is not full:
            size += len(bare)
        return size

    def status(self) -> dict:
        return wire_task.status(self.state, self.timestamp, self.status_message())

    def to_dict(self, artifacts: bool = True, empty_list: bool = False) -> dict:
        found = None
        if artifacts:
            found = self.artifacts()
            if not found and not empty_list:
                found = None
        metadata = None
        if self.running and self.terminal:
            metadata = {"murmur": {"runningCommands": self.running}}
        return wire_task.task(self.id, self.context_id, self.status(), found, metadata)

    def _serialize(self, artifacts: bool) -> str:
        """``_dumps(self.to_dict(artifacts))``; a task of text alone without the encoder."""
        status_text, artifact = self.status_text, None
        if artifacts:
            if self.response is not None and self.state == COMPLETED:
                artifact = ("response", self.response)
            elif self.prompt is not None and self.state == INPUT_REQUIRED:
                artifact = ("prompt", self.prompt)
        if (self.agent_artifacts or self.residue or (self.running and self.terminal)
                or (status_text is not None and type(status_text) is not str)
                or (artifact is not None and type(artifact[1]) is not str)):
            return _dumps(self.to_dict(artifacts))
        return wire_task.text_task_json(self.id, self.context_id, self.state, self.timestamp,
                                        status_text, artifact)

    def to_json(self, artifacts: bool = True, cache: bool = True) -> str:
        """Return the task as GetTask answers it (cached until the next change).

        ``cache=False`` serializes without keeping the text: for the one answer
        a held request gets, so a finished task nobody reads holds no copy.
        """
        # PERF: a read of an unchanged task costs one attribute lookup.
        if not cache and self._json is None:
            return self._serialize(artifacts)
        if artifacts:
            if self._json is None:
                self._json = self._serialize(True)
            return self._json
        if self._json_bare is None:
            if (self.response is None and self.prompt is None and not self.residue
                    and not self.agent_artifacts):
                return self.to_json(True)
            self._json_bare = self._serialize(False)
        return self._json_bare

    def to_json_with_empty_artifacts(self) -> str:
        """ListTasks with includeArtifacts: ``artifacts`` present even when it is []."""
        return _dumps(self.to_dict(True, empty_list=True))

    def touch(self) -> None:
        """Forget the cached wire form; called by the store on every change."""
        self._json = None
        self._json_bare = None
