"""What every wire schema shares: ProtoJSON's rules, strict JSON types, the first refusal.

A schema reads one shape of the spec with its fields declared in the spec's
order. marshmallow records a field's errors in that order, so the first error
of a failed ``load`` is the first rule the request broke: ``first_refusal``
turns it into the -32602 the spec writes. Unknown fields are ignored (ProtoJSON).
"""
from __future__ import annotations

import logging

from marshmallow import EXCLUDE, Schema, ValidationError, fields

from murmur_wsgi.errors import InvalidParamsError

logger = logging.getLogger(__name__)


class WireSchema(Schema):
    """A shape of the wire: unknown fields ignored, fields read in declaration order."""

    class Meta:
        unknown = EXCLUDE


def _refusal(message: str, null: str | None = None) -> dict:
    return {"required": message, "invalid": message, "null": null or message,
            "validator_failed": message}


class StrictString(fields.String):
    """A JSON string; every other value (null included) is refused with ``message``."""

    def __init__(self, message: str, **kwargs):
        super().__init__(error_messages=_refusal(message), **kwargs)


class StrictBoolean(fields.Boolean):
    """A JSON true or false; 1, "true" and null are refused."""

    def __init__(self, message: str | None = None, **kwargs):
        if message is not None:
            kwargs["error_messages"] = _refusal(message)
        super().__init__(**kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class StrictInteger(fields.Field):
    """A JSON integer (not a boolean, not 2.0); refused with ``message``."""

    def __init__(self, message: str, **kwargs):
        super().__init__(error_messages=_refusal(message), **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class Present(fields.Field):
    """Any JSON value; null too (a present null is not "absent")."""

    def __init__(self, **kwargs):
        kwargs.setdefault("allow_none", True)
        super().__init__(**kwargs)


class ObjectField(fields.Field):
    """A JSON object (null is not one)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise self.make_error("invalid")
        return value


class NonEmptyList(fields.Field):
    """A JSON array with at least one item."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list) or not value:
            raise self.make_error("invalid")
        return value


def refusals(required: str, invalid: str) -> dict:
    """A field's error messages: ``required`` when absent, ``invalid`` for null or a bad value."""
    return {"required": required, "invalid": invalid, "null": invalid}


def invalid(what: str) -> InvalidParamsError:
    """-32602 'Invalid params: <what>'."""
    return InvalidParamsError(f"Invalid params: {what}")


def first_message(messages) -> str:
    """The first error text of a ValidationError's (nested) messages, in field order."""
    while not isinstance(messages, str):
        if isinstance(messages, dict):
            messages = next(iter(messages.values()))
        else:
            messages = messages[0]
    return messages


def first_refusal(ex: ValidationError) -> InvalidParamsError:
    """The -32602 that the first broken rule of a failed load answers."""
    return InvalidParamsError(first_message(ex.messages))


def load(schema: Schema, data: dict):
    """``schema.load(data)``, its first error raised as -32602."""
    try:
        return schema.load(data)
    except ValidationError as ex:
        raise first_refusal(ex) from None
