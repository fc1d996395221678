"""``ctx.artifacts``: the named artifacts an agent publishes, whole or streamed in chunks.

Each artifact becomes A2A ``artifactUpdate`` events and stays on the task
(GetTask lists it before the door's own ``response``, ``prompt`` and
``residue``). Whole: one event, ``append: false, lastChunk: true``.
Streamed: the first chunk ``append: false``, each later one ``append: true``,
and the last ``lastChunk: true``.

Concurrency:
    An ``Artifacts`` belongs to one task and is used from its agent's thread
    only; the task record changes under the store's lock in
    ``TaskManager.publish_artifact``.
"""
from __future__ import annotations

import logging
from typing import Callable

from murmur_wsgi.agents.parts import as_part, as_parts
from murmur_wsgi.agents.endings import AgentValueError, check_text
from murmur_wsgi.agents.owned import json_copy

logger = logging.getLogger(__name__)

# The door's own artifacts (the reference's): an agent's artifact never takes their names.
RESERVED = frozenset({"response", "prompt", "residue"})

# publish(artifact, append, last_chunk): artifact is ProtoJSON, parts already on the wire.
Publish = Callable[[dict, bool, bool], None]


def artifact_wire(name: str, parts: list, description: str | None = None,
                  metadata: dict | None = None) -> dict:
    """An A2A ``Artifact`` in ProtoJSON; its ``artifactId`` is its name."""
    artifact = {"artifactId": name, "name": name}
    if description is not None:
        artifact["description"] = description
    artifact["parts"] = [part.to_wire() for part in parts]
    if metadata is not None:
        artifact["metadata"] = metadata
    return artifact


def owned(artifact: dict) -> dict:
    """The artifact, copied where the agent could still change it (data, metadata).

    Raises:
        AgentValueError (a TypeError and a ValueError): a data value or metadata is
            not JSON (no NaN or infinity, string keys), or a text holds a lone
            surrogate, in the agent's own call: no stream meets it.
    """
    what = f"artifact {artifact['name']!r}"
    if "metadata" not in artifact and all(
            "data" not in part and "metadata" not in part for part in artifact["parts"]):
        # PERF: strings only, which nobody can change: each is checked, none copied.
        for value in _strings(artifact):
            check_text(value, what)
        return artifact
    return json_copy(artifact, what)


def _strings(artifact: dict):
    for key in ("name", "description"):
        if isinstance(artifact.get(key), str):
            yield artifact[key]
    for part in artifact["parts"]:
        for value in part.values():
            if isinstance(value, str):
                yield value


def _check_extras(description, metadata) -> None:
    if description is not None and not isinstance(description, str):
        raise TypeError("an artifact's description is a str")
    if metadata is not None and not isinstance(metadata, dict):
        raise TypeError("an artifact's metadata is a dict")


class Artifacts:
    """The artifacts one task has written; names are unique within the task."""

    def __init__(self, publish: Publish):
        self._publish = publish
        self._names: set[str] = set()
        self._streams: dict[str, ArtifactStream] = {}

    def open(self, name: str) -> ArtifactStream | None:
        """The stream ``name`` if it is still open, else None."""
        out = self._streams.get(name)
        return out if out is not None and not out.closed else None

    def open_streams(self) -> list[ArtifactStream]:
        """The streams still open, in the order they were opened."""
        return [out for out in self._streams.values() if not out.closed]

    @property
    def names(self) -> list[str]:
        """The names written so far (sorted)."""
        return sorted(self._names)

    def _check_name(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("an artifact's name is a non-empty string")
        if name in RESERVED:
            raise ValueError(f"artifact name {name!r} is the door's own; choose another")
        if name in self._names:
            raise ValueError(f"artifact {name!r} was already written in this task")

    def _claim(self, name: str) -> None:
        self._check_name(name)
        self._names.add(name)

    def add(self, name: str, parts, *, description: str | None = None,
            metadata: dict | None = None) -> None:
        """Publish the whole artifact ``name`` (one ``artifactUpdate``, lastChunk true).

        Args:
            parts: one part or a list of parts; each a ``str`` (text), ``bytes``
                (raw), ``dict``/``list`` (data) or a TextPart/DataPart/FilePart/UrlPart.
                A list given here is the list of parts: a list as a data value
                goes in ``DataPart([...])``.

        Raises:
            ValueError: the name is empty, the door's own, or already written.
            TypeError: a part is none of the kinds above.
            TaskCanceled: the task was canceled.
        """
        _check_extras(description, metadata)
        self._check_name(name)
        artifact = owned(artifact_wire(name, as_parts(parts), description, metadata))
        self._claim(name)
        self._publish(artifact, False, True)

    def stream(self, name: str, *, description: str | None = None,
               metadata: dict | None = None) -> ArtifactStream:
        """Open artifact ``name`` for writing in chunks; use it as a context manager.

        Raises:
            ValueError: the name is empty, the door's own, or already written.
        """
        _check_extras(description, metadata)
        if metadata is not None:
            metadata = owned({"name": name, "parts": [], "metadata": metadata})["metadata"]
        self._claim(name)
        out = self._streams[name] = ArtifactStream(self._publish, name, description, metadata)
        return out


class ArtifactStream:
    """One artifact written chunk by chunk: ``with ctx.artifacts.stream(name) as out``."""

    def __init__(self, publish: Publish, name: str, description: str | None,
                 metadata: dict | None):
        self._publish = publish
        self.name = name
        self._description = description
        self._metadata = metadata
        self._started = False
        self.closed = False

    def write(self, part, *, last: bool = False) -> None:
        """Publish one chunk: one part (str, bytes, dict, list or a part object).

        ``last=True`` marks it the last chunk (``lastChunk: true``) and closes the stream.

        Raises:
            ValueError: the stream is closed.
            TypeError: ``part`` is not a part.
            TaskCanceled: the task was canceled.
        """
        if self.closed:
            raise ValueError(f"artifact {self.name!r} is closed")
        # NOTE: published as lastChunk, a bool on the wire (as write's final): "yes" or 1
        # was written as it was given.
        if type(last) is not bool:
            raise AgentValueError(f"artifact {self.name!r}: last is bool, "
                                  f"not {type(last).__name__}")
        self._send([as_part(part)], last)

    def close(self) -> None:
        """End the artifact: an empty last chunk (nothing when the last one was marked)."""
        if not self.closed:
            self._send([], True)

    def _send(self, parts: list, last: bool) -> None:
        if self._started:
            artifact = artifact_wire(self.name, parts)
        else:
            artifact = artifact_wire(self.name, parts, self._description, self._metadata)
        artifact = owned(artifact)
        append = self._started
        self._started = True
        if last:
            self.closed = True
        self._publish(artifact, append, last)

    def __enter__(self) -> ArtifactStream:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # NOTE: an exception ends the task (failed or canceled): no last chunk after it.
        if exc_type is None:
            self.close()
        else:
            self.closed = True
