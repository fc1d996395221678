"""The typed message and parts an agent reads (``ctx.message``) and writes (artifacts).

Each part is an A2A v1.0 ``Part``: one content (text, raw bytes, a url or a
JSON value) with its ``media_type``, ``filename`` and ``metadata``. A part
converts to its ProtoJSON form with ``to_wire()``; ``part_from_wire`` and
``Message.from_wire`` read that form back (from a message already checked
on the wire: they do not repeat its checks).
"""
from __future__ import annotations

import base64
import binascii
import logging
from dataclasses import dataclass
from typing import Any, Union

logger = logging.getLogger(__name__)


def _extras(wire: dict, media_type, filename, metadata) -> dict:
    if media_type is not None:
        wire["mediaType"] = media_type
    if filename is not None:
        wire["filename"] = filename
    if metadata is not None:
        wire["metadata"] = metadata
    return wire


@dataclass(frozen=True, slots=True)
class TextPart:
    """A text part (``{"text": …, "mediaType": "text/plain"}`` by default)."""

    text: str
    media_type: str | None = "text/plain"
    filename: str | None = None
    metadata: dict | None = None

    def to_wire(self) -> dict:
        return _extras({"text": self.text}, self.media_type, self.filename, self.metadata)


@dataclass(frozen=True, slots=True)
class DataPart:
    """A data part: any JSON value (``{"data": …, "mediaType": "application/json"}``)."""

    data: Any
    media_type: str | None = "application/json"
    filename: str | None = None
    metadata: dict | None = None

    def to_wire(self) -> dict:
        return _extras({"data": self.data}, self.media_type, self.filename, self.metadata)


@dataclass(frozen=True, slots=True)
class FilePart:
    """A raw part: bytes, sent base64-encoded, with their media type and a file name."""

    raw: bytes
    media_type: str | None = "application/octet-stream"
    filename: str | None = None
    metadata: dict | None = None

    def to_wire(self) -> dict:
        encoded = base64.b64encode(self.raw).decode("ascii")
        return _extras({"raw": encoded}, self.media_type, self.filename, self.metadata)


@dataclass(frozen=True, slots=True)
class UrlPart:
    """A url part: a reference to content elsewhere."""

    url: str
    media_type: str | None = None
    filename: str | None = None
    metadata: dict | None = None

    def to_wire(self) -> dict:
        return _extras({"url": self.url}, self.media_type, self.filename, self.metadata)


Part = Union[TextPart, DataPart, FilePart, UrlPart]
PART_TYPES = (TextPart, DataPart, FilePart, UrlPart)


def as_part(value) -> Part:
    """Make one part of ``value``: a part as it is, str text, bytes raw, dict or list data.

    Raises:
        TypeError: ``value`` is none of these (wrap any other JSON value in DataPart).
    """
    if isinstance(value, PART_TYPES):
        return value
    if isinstance(value, str):
        return TextPart(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return FilePart(bytes(value))
    if isinstance(value, (dict, list)):
        return DataPart(value)
    raise TypeError(f"a part is a str, bytes, dict, list or TextPart/DataPart/FilePart/"
                    f"UrlPart, not {type(value).__name__}")


def as_parts(value) -> list[Part]:
    """Make the parts of an artifact: a list or tuple is one part per item, else one part."""
    if isinstance(value, (list, tuple)):
        parts = [as_part(item) for item in value]
    else:
        parts = [as_part(value)]
    if not parts:
        raise ValueError("an artifact needs at least one part")
    return parts


def _decode_raw(text: str) -> bytes:
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except ValueError:                          # binascii.Error, or non-ASCII text
        raise ValueError("raw is not base64") from None


def _dict_or_none(value) -> dict | None:
    return value if isinstance(value, dict) else None


def part_from_wire(part: dict) -> Part:
    """Read one ProtoJSON part (exactly one of text, raw, url and data is set).

    Raises:
        ValueError: ``raw`` is not base64, or the part sets no content.
    """
    extras = (part.get("mediaType") or None, part.get("filename") or None,
              _dict_or_none(part.get("metadata")))
    if "text" in part:
        return TextPart(part["text"], *extras)
    if "data" in part:
        return DataPart(part["data"], *extras)
    if "raw" in part:
        return FilePart(_decode_raw(part["raw"]), *extras)
    if "url" in part:
        return UrlPart(part["url"], *extras)
    raise ValueError("a part sets one of text, raw, url and data")


_KINDS = ("text", "raw", "url", "data")
_STRINGS = ("text", "raw", "url", "mediaType", "filename")


def read_part(part) -> Part:
    """Read one ProtoJSON part from an untrusted writer (a harness), checking its shape.

    Raises:
        ValueError: what is wrong with it, in a few words.
    """
    if not isinstance(part, dict):
        raise ValueError("must be an object")
    kinds = [key for key in _KINDS if key in part]
    if len(kinds) != 1:
        raise ValueError("must set exactly one of text, raw, url and data")
    for key in _STRINGS:
        if key in part and not isinstance(part[key], str):
            raise ValueError(f"{key} must be a string")
    if part.get("metadata") is not None and not isinstance(part["metadata"], dict):
        raise ValueError("metadata must be an object")
    return part_from_wire(part)


@dataclass(frozen=True, slots=True)
class Message:
    """The message that started a task, as its agent reads it (``ctx.message``).

    Attributes:
        message_id: the sender's ``messageId``.
        context_id: the message's ``contextId``; None when it named none.
        task_id: the ``taskId`` it named; None for a message that starts a task.
        parts: the parts in order: ``TextPart``, ``DataPart``, ``FilePart`` or ``UrlPart``.
        metadata: the message's ``metadata`` object, or None.
        extensions: the URIs of its ``extensions``, in order.
        reference_task_ids: each ``referenceTaskIds`` entry once, in first-occurrence order.
    """

    message_id: str
    context_id: str | None = None
    task_id: str | None = None
    parts: tuple = ()
    metadata: dict | None = None
    extensions: tuple = ()
    reference_task_ids: tuple = ()
    role: str = "ROLE_USER"

    @classmethod
    def from_wire(cls, msg: dict) -> Message:
        """Read a ProtoJSON ``Message`` the door has already accepted."""
        extensions = msg.get("extensions")
        references = msg.get("referenceTaskIds")
        return cls(
            message_id=msg["messageId"],
            context_id=msg.get("contextId") or None,
            task_id=msg.get("taskId") or None,
            parts=tuple(part_from_wire(part) for part in msg.get("parts") or ()),
            metadata=_dict_or_none(msg.get("metadata")),
            extensions=tuple(e for e in extensions if isinstance(e, str))
            if isinstance(extensions, list) else (),
            reference_task_ids=tuple(dict.fromkeys(
                r for r in references if isinstance(r, str) and r))
            if isinstance(references, list) else (),
            role=msg.get("role") or "ROLE_USER")

    def to_wire(self) -> dict:
        """The message in ProtoJSON (what a harness's ``task`` line carries)."""
        wire: dict = {"messageId": self.message_id}
        if self.context_id is not None:
            wire["contextId"] = self.context_id
        if self.task_id is not None:
            wire["taskId"] = self.task_id
        wire["role"] = self.role
        wire["parts"] = [part.to_wire() for part in self.parts]
        if self.metadata is not None:
            wire["metadata"] = self.metadata
        if self.extensions:
            wire["extensions"] = list(self.extensions)
        if self.reference_task_ids:
            wire["referenceTaskIds"] = list(self.reference_task_ids)
        return wire

    @property
    def text_parts(self) -> list[str]:
        """The text of each text part, in order."""
        return [part.text for part in self.parts if isinstance(part, TextPart)]

    @property
    def data_parts(self) -> list:
        """The value of each data part, in order."""
        return [part.data for part in self.parts if isinstance(part, DataPart)]


@dataclass(frozen=True, slots=True)
class Reply(Message):
    """The client's reply to ``ctx.ask``: its message, typed, and ``text`` as the agent reads it.

    ``text`` is rendered as ``ctx.text`` is: the text parts joined by newlines, data
    fenced, and the whole inside the untrusted fence unless the sender is trusted.
    """

    text: str = ""

    @classmethod
    def from_wire(cls, msg: dict, text: str = "") -> Reply:
        """Read the ProtoJSON reply the server accepted; ``text`` as the agent reads it."""
        message = Message.from_wire(msg)
        return cls(message.message_id, message.context_id, message.task_id, message.parts,
                   message.metadata, message.extensions, message.reference_task_ids,
                   message.role, text)
