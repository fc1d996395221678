"""Step 12: params, when present, is an object."""
from __future__ import annotations

import logging

from murmur_wsgi.errors import InvalidParamsError
from murmur_wsgi.serving.envelope import ABSENT

logger = logging.getLogger(__name__)


def check(params) -> dict:
    """Return params as a dict ({} when omitted), or -32602."""
    if params is ABSENT:
        return {}
    if not isinstance(params, dict):
        raise InvalidParamsError("Invalid params: params must be an object")
    return params
