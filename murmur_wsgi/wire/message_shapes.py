"""The shapes of a door's message: one schema for each of the steps that reads a shape.

``wire/message.py`` runs them, in the reference's order, as its ``STEPS``
(``ParamsSchema`` 1, ``MessageHeadSchema`` 2, ``MessageIdsSchema`` 5,
``DoorExtensionSchema`` 6, ``ConfigurationSchema`` 7; a part's strings, step 4,
are ``wire/parts.py``'s). Each refusal's text is written on its field.
"""
from __future__ import annotations

import logging

from marshmallow import ValidationError, fields, validate

from murmur_wsgi.wire.base import (NonEmptyList, ObjectField, Present, StrictBoolean,
                                   StrictString, WireSchema, refusals)

logger = logging.getLogger(__name__)

MAX_REFERENCES = 16


class DoorExtensionSchema(WireSchema):
    """Step 6: the object under the door URI in message.metadata; other keys are ignored."""

    forget_session = StrictBoolean(data_key="forgetSession", load_default=False)


class ParamsSchema(WireSchema):
    """Step 1: params.message is an object (a bare message as params is refused)."""

    message = ObjectField(required=True, error_messages=refusals(
        "Invalid params: message is required; params holds the Message under message",
        "Invalid params: message must be an object"))


class MessageHeadSchema(WireSchema):
    """Step 2: messageId, role, then parts (each part an object: ``_head``)."""

    message_id = StrictString("Invalid params: message.messageId must be a non-empty string",
                              data_key="messageId", required=True,
                              validate=validate.Length(min=1))
    role = fields.Raw(data_key="role", required=True, validate=validate.Equal("ROLE_USER"),
                    error_messages=refusals(
                        "Invalid params: message.role is required",
                        "Invalid params: message.role must be ROLE_USER: a message to this "
                        "agent is from the user"))
    parts = NonEmptyList(data_key="parts", required=True, error_messages=refusals(
        "Invalid params: message.parts is required",
        "Invalid params: message.parts must be a non-empty array of parts"))

    def on_bind_field(self, field_name, field_obj):
        # NOTE: a required field's absence has its own answer; every other refusal of
        # the field answers its "invalid" text, a validator's too.
        messages = field_obj.error_messages
        if field_name == "message_id":
            messages["required"] = "Invalid params: message.messageId is required"
        for validator in field_obj.validators:
            validator.error = messages["invalid"]


class References(fields.Field):
    """message.referenceTaskIds: an array of non-empty strings; each id once, in order."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list):
            raise self.make_error("invalid")
        for i, ref in enumerate(value):
            if not isinstance(ref, str) or not ref:
                raise ValidationError(f"Invalid params: message.referenceTaskIds[{i}] must be "
                                      "a non-empty string")
        references = list(dict.fromkeys(value))
        if len(references) > MAX_REFERENCES:
            raise ValidationError(f"Invalid params: message.referenceTaskIds names "
                                  f"{len(references)} distinct tasks; at most {MAX_REFERENCES}")
        return references


class MessageIdsSchema(WireSchema):
    """Step 5: taskId and contextId, then referenceTaskIds ("" names no task, no context)."""

    task_id = StrictString("Invalid params: message.taskId must be a string", data_key="taskId",
                           load_default=None, allow_none=False)
    context_id = StrictString("Invalid params: message.contextId must be a string",
                              data_key="contextId", load_default=None, allow_none=False)
    reference_task_ids = References(
        data_key="referenceTaskIds", load_default=list,
        error_messages=refusals("", "Invalid params: message.referenceTaskIds must be an "
                                    "array of task ids"))


class ConfigurationSchema(WireSchema):
    """Step 7: configuration.returnImmediately is a boolean when present and not null."""

    # NOTE: this refusal, as the spec writes it, has no "Invalid params: " before it.
    return_immediately = StrictBoolean("configuration.returnImmediately must be a boolean",
                                       data_key="returnImmediately", load_default=None,
                                       allow_none=True)
    push_config = Present(data_key="taskPushNotificationConfig", load_default=None)


PARAMS = ParamsSchema()
HEAD = MessageHeadSchema()
IDS = MessageIdsSchema()
CONFIGURATION = ConfigurationSchema()
DOOR_EXTENSION = DoorExtensionSchema()
