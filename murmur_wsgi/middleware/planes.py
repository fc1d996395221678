"""Step 4: the operator plane under /resources/files."""
from __future__ import annotations

import logging

from murmur_wsgi.context import CallContext
from murmur_wsgi.errors import InsufficientScope, PlaneRefusal
from murmur_wsgi.uris import FILES_PLANE

logger = logging.getLogger(__name__)


def route(environ: dict, ctx: CallContext, door) -> tuple | None:
    """Answer a request under /resources/files, or None to go on."""
    path = environ.get("PATH_INFO", "/")
    if not (path == FILES_PLANE or path.startswith(FILES_PLANE + "/")
            or path.startswith("/resources/")):
        return None
    credential = ctx.credential
    if credential is not None and not credential.reaches("resources/files"):
        raise InsufficientScope(credential.name, "resources/files", door.tokens.realm)
    plane = door.files_plane
    if plane is None:
        raise PlaneRefusal(404, "no_resource_plane", "this capsule declares no operator plane")
    return plane.serve(environ)
