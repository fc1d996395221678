"""A message's parts, as both readers check them: the kinds, the string fields, raw and images.

The door's steps (``wire/message.py``) and the hub's (``wire/message_hub.py``)
read a part with these, so a part's rule and its refusal are written once.
"""
from __future__ import annotations

import binascii
import logging

from marshmallow import ValidationError

from murmur_wsgi.errors import InvalidParamsError
from murmur_wsgi.wire.base import StrictString, WireSchema, first_message, invalid

logger = logging.getLogger(__name__)

PART_KINDS = ("text", "raw", "url", "data")
PART_KEYS = frozenset((*PART_KINDS, "metadata", "filename", "mediaType"))  # a Part's (A2A v1.0)
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


class PartFieldsSchema(WireSchema):
    """One part: text, raw, url, mediaType and filename are strings where present."""

    text = StrictString("text", load_default=None, allow_none=False)
    raw = StrictString("raw", load_default=None, allow_none=False)
    url = StrictString("url", load_default=None, allow_none=False)
    media_type = StrictString("mediaType", data_key="mediaType", load_default=None,
                              allow_none=False)
    filename = StrictString("filename", load_default=None, allow_none=False)


PART_FIELDS = PartFieldsSchema()


def part_field_refusal(i: int, part: dict) -> InvalidParamsError | None:
    """'message.parts[i].<key> must be a string' for the first such key of ``part``, or None."""
    try:
        PART_FIELDS.load(part)
    except ValidationError as ex:
        return invalid(f"message.parts[{i}].{first_message(ex.messages)} must be a string")
    return None


def decode_raw(i: int, raw: str) -> bytes:
    """A raw part's bytes (strict base64), or 'message.parts[i].raw is not base64'."""
    try:
        return binascii.a2b_base64(raw, strict_mode=True)
    except ValueError:                              # binascii.Error, or non-ASCII text
        raise invalid(f"message.parts[{i}].raw is not base64") from None


def is_image_of(media_type: str, data: bytes) -> bool:
    """Tell whether ``data`` starts with the magic bytes of ``media_type``."""
    if media_type == "image/png":
        return data.startswith(b"\x89PNG\r\n\x1a\n")
    if media_type == "image/jpeg":
        return data.startswith(b"\xff\xd8\xff")
    if media_type == "image/gif":
        return data.startswith((b"GIF87a", b"GIF89a"))
    return data[:4] == b"RIFF" and data[8:12] == b"WEBP"       # image/webp


def image_type(part: dict) -> str | None:
    """Return the image type a raw part declares (lowercased), or None."""
    declared = part.get("mediaType")
    if not declared:
        return None
    # NOTE: media types match case-insensitively (RFC 6838); parameters are not accepted.
    lowered = declared.lower()
    return lowered if lowered in IMAGE_TYPES else None


# --- the common message, as both fast paths accept it -----------------------------------

_FAST_PART_STRINGS = ("text", "mediaType", "filename")


def fast_head(params: dict) -> tuple[dict, str, list] | None:
    """(message, messageId, parts) of a message every reader's first steps accept, or None.

    A fast path's head: a message object, a non-empty string messageId, ROLE_USER and
    a non-empty list of parts. Anything else is declined for the steps to refuse.
    """
    msg = params.get("message")
    if type(msg) is not dict:
        return None
    message_id = msg.get("messageId")
    parts = msg.get("parts")
    if type(message_id) is not str or not message_id or msg.get("role") != "ROLE_USER" \
            or type(parts) is not list or not parts:
        return None
    return msg, message_id, parts


def fast_kind(part) -> str | None:
    """"text" or "data" for a part a fast path reads, None for any other.

    An object with exactly one of text and data, no raw nor url, its text,
    mediaType and filename strings where present.
    """
    if type(part) is not dict or "raw" in part or "url" in part:
        return None
    for key in _FAST_PART_STRINGS:
        if key in part and type(part[key]) is not str:
            return None
    if "text" in part:
        return None if "data" in part else "text"
    return "data" if "data" in part else None
