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
