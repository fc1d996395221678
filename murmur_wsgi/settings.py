"""What the door's manifest and the hub's configuration are validated with.

The one-line refusal (``ManifestError``: the hub's ``ConfigError`` is one), the
block every settings schema is (``Block``), byte sizes, strict integers and seconds
(each bounded: ``MAX_INT``, ``MAX_SECS``), and
marshmallow's nested messages flattened to the first ``key.path: what is wrong``.
"""
from __future__ import annotations

import re
from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, pre_load

# NOTE: a setting past these is refused at load: a larger wait overflows the platform's
# clocks and locks (threading's waits end at about 292 years, and one of 1e10 s raises
# OverflowError), a larger integer Redis and float arithmetic (a rate of 10**400 per minute).
MAX_SECS = 10 * 365 * 86_400          # ten years
MAX_INT = 2 ** 63 - 1                 # a signed 64-bit integer, as Redis holds one

# NOTE: ASCII digits and blanks only (``\d`` takes any script's digits, ``\s`` a line break).
_SIZE = re.compile(r"[ \t]*([0-9]+)[ \t]*(Ki|Mi|Gi)?[ \t]*")
_SIZE_DIGITS = len(str(2 ** 63))          # a longer number is past any bound, unread
# A duration given as text: ASCII digits, an optional sign, point and exponent, blanks
# around (float() takes any script's digits, any Unicode space and a line break).
_SECONDS = re.compile(r"[ \t]*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*")
_UNITS = {None: 1, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3}

# Every character str.splitlines() breaks on, and its escape.
_LINE_BREAKS = {c: repr(chr(c))[1:-1]
                for c in (0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029)}


class ManifestError(Exception):
    """A manifest that cannot be served; ``str()`` is the one line to print."""

    def __init__(self, line: str):
        # NOTE: a key or value may hold a line break; escaped, the message stays one line.
        super().__init__(str(line).translate(_LINE_BREAKS))


class Size(fields.Field):
    """A byte count: an integer, or a string with a Ki/Mi/Gi suffix."""

    default_error_messages = {"invalid": "must be a whole number of bytes, or one with Ki, Mi or Gi",
                              "positive": "must be greater than 0",
                              "too_large": f"must be at most {MAX_INT} bytes"}

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool):
            raise self.make_error("invalid")
        if isinstance(value, int):
            number = value
        elif isinstance(value, str) and (m := _SIZE.fullmatch(value)):
            digits = m.group(1).lstrip("0") or "0"
            if len(digits) > _SIZE_DIGITS:      # int() refuses past 4,300 digits: a traceback
                raise self.make_error("too_large")
            number = int(digits) * _UNITS[m.group(2)]
        else:
            raise self.make_error("invalid")
        if number <= 0:
            raise self.make_error("positive")
        if number > MAX_INT:
            raise self.make_error("too_large")
        return number


class StrictInt(fields.Integer):
    """An integer that refuses booleans and floats, and any past ``MAX_INT``."""

    default_error_messages = {"too_large": f"must be at most {MAX_INT}"}

    def __init__(self, **kwargs):
        super().__init__(strict=True, **kwargs)

    def _validated(self, value):
        if isinstance(value, bool):
            raise self.make_error("invalid")
        value = super()._validated(value)
        if value is not None and value > MAX_INT:
            raise self.make_error("too_large")
        return value


class StrictBool(fields.Boolean):
    """true or false: a number is refused (1 and 1.0 equal True in Python, 0 False), as is
    a string ("true", "yes")."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class AsciiFloat(fields.Float):
    """A float; given as text, ASCII digits and blanks only (``_SECONDS``): float() takes
    any script's digits, any Unicode space and a line break."""

    def _validated(self, value):
        if isinstance(value, str) and not _SECONDS.fullmatch(value):
            raise self.make_error("invalid")
        return super()._validated(value)


class Seconds(AsciiFloat):
    """A duration in seconds: finite, and at most ``MAX_SECS``."""

    default_error_messages = {"too_large": f"must be at most {MAX_SECS} seconds (ten years)"}

    def _validated(self, value):
        value = super()._validated(value)
        if value is not None and value > MAX_SECS:
            raise self.make_error("too_large")
        return value


class Block(Schema):
    """A block of settings: unknown keys refused, absent nested blocks read as {}."""

    class Meta:
        unknown = RAISE

    @pre_load
    def _fill_blocks(self, data, **kwargs):
        """Give every absent nested block ``{}`` so that its own defaults apply."""
        if not isinstance(data, dict):
            raise ValidationError("must be a mapping of keys", "_schema")
        missing = [name for name, fld in self.fields.items()
                   if isinstance(fld, fields.Nested) and fld.load_default is dict
                   and (fld.data_key or name) not in data]
        if missing:
            data = dict(data)
            for name in missing:
                data[name] = {}
        return data


_SURROGATE = re.compile("[\ud800-\udfff]")


def _shown(text: str) -> str:
    """``text`` with each lone surrogate as its escape (``\\ud800``)."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def first_unencodable(data: Any, skip: frozenset = frozenset()) -> str | None:
    """The path (``a.b[0].c``) of the first string of ``data``, a key or a value at any
    depth, that UTF-8 cannot encode, or None; a path in ``skip`` is not looked into.

    Such a string holds a lone surrogate: YAML reads ``"\\ud800"`` as one, and Python
    reads an environment variable's bytes that are not UTF-8 as them (surrogateescape).
    A card, a log line or a JSON answer holding one cannot be written. Its path is
    shown with each surrogate escaped. A structure YAML made recursive (``&a [*a]``) is
    walked once.
    """
    stack: list = [("", data)]
    seen: set = set()
    while stack:
        path, value = stack.pop()
        if path in skip:
            continue
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return _shown(path)
            continue
        if not isinstance(value, (dict, list)) or id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))
            continue
        for key, item in reversed(list(value.items())):
            name = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and _SURROGATE.search(key):
                return _shown(name)
            stack.append((name, item))
    return None


def first_error(messages: Any, path: str = "") -> str:
    """Flatten marshmallow's nested messages to ``key.path: what is wrong``."""
    if isinstance(messages, dict):
        key, value = next(iter(messages.items()))
        if key == "_schema":
            return first_error(value, path)
        if isinstance(key, int):
            return first_error(value, f"{path}[{key}]")
        if isinstance(value, dict) and set(value) == {"value"}:
            value = value["value"]                 # fields.Dict value errors
        return first_error(value, f"{path}.{key}" if path else str(key))
    if isinstance(messages, list):
        text = messages[0] if messages else "is invalid"
        if isinstance(text, (dict, list)):
            return first_error(text, path)
        if text == "Unknown field.":
            text = "is not a key this door reads"
        elif text == "Missing data for required field.":
            text = "is required"
        return f"{path}: {text}" if path else str(text)
    return f"{path}: {messages}"
