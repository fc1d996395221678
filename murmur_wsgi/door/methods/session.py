"""murmur.StopSession: cancel every live task, report what is left running."""
from __future__ import annotations

import logging

from murmur_wsgi.uris import DOOR_URI

logger = logging.getLogger(__name__)


def stop_session(door, call, params: None):
    """Cancel every live task; answer {canceled, residue, session_id}. The door keeps serving."""
    session = door.session
    canceled = session.manager.stop_all()
    residue = [work.residue() for work in session.works.running()]
    call.used_extensions.append(DOOR_URI)
    return {"canceled": canceled, "residue": residue, "session_id": session.id}
