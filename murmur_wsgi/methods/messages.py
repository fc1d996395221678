"""SendMessage: read the message, route it, answer held or at once."""
from __future__ import annotations

import logging

from murmur_wsgi.errors import InternalError

logger = logging.getLogger(__name__)


def send_message(door, call):
    raise InternalError("SendMessage is not served yet")
