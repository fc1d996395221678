"""An agent spec, as murmur.yaml's ``agent`` and hub.yaml's ``agents.<name>.agent`` write it.

``demo``, ``"pkg.module:callable"``, or ``{process: [cmd, ...]}`` (a harness,
with its timeouts and bounds): ``AgentField`` checks the value and loads
a harness block with its defaults.
"""
from __future__ import annotations

import logging
import re

from marshmallow import ValidationError, fields, validate, validates

from murmur_wsgi.settings import Block, Seconds, Size, StrictInt

logger = logging.getLogger(__name__)


class HarnessSchema(Block):
    process = fields.List(fields.String(), required=True, validate=validate.Length(min=1))
    idle_timeout_secs = Seconds(load_default=600.0, validate=validate.Range(min=0, min_inclusive=False))
    cancel_grace_secs = Seconds(load_default=10.0, validate=validate.Range(min=0))
    max_line_bytes = Size(load_default=1024 ** 2)
    # NOTE: at most 512: deeper, the JSON parser's recursion reaches Python's limit; at
    # least 3: an artifact-add's parts sit at depth 3.
    max_line_depth = StrictInt(load_default=64, validate=validate.Range(
        min=3, max=512, error="must be from 3 to 512 levels"))
    max_stderr_bytes = Size(load_default=1024 ** 2)
    max_session_id_bytes = Size(load_default=1024)

    @validates("process")
    def _spawnable(self, value, **kwargs):
        # NOTE: a NUL is no argument exec takes: every task failed at spawn (ValueError).
        for i, arg in enumerate(value):
            if "\x00" in arg:
                raise ValidationError({i: ["holds a NUL, which no command argument can"]})


class AgentField(fields.Field):
    """``demo``, ``"pkg.module:callable"`` or ``{process: [cmd, ...]}``."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, dict):
            return HarnessSchema().load(value)
        # NOTE: fullmatch: "$" also matches before a trailing line break ("os:getcwd\n").
        if isinstance(value, str) and (value == "demo" or re.fullmatch(r"[\w.]+:[\w.]+", value)):
            return value
        raise ValidationError('must be demo, "pkg.module:callable" or {process: [cmd, ...]}')
