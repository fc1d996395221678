"""Step 4: the operator plane under /resources/files: its scope, then the plane."""
from __future__ import annotations

import logging

from murmur_wsgi.door.context import CallContext
from murmur_wsgi.errors import InsufficientScope
from murmur_wsgi.door.planes.files import refuse
from murmur_wsgi.uris import FILES_PLANE

logger = logging.getLogger(__name__)

SCOPE = "resources/files"


def route(environ: dict, ctx: CallContext, door) -> tuple | None:
    """Answer a request under /resources/ (the peer plane answered at step 1), or None."""
    path = environ.get("PATH_INFO", "/")
    if path != FILES_PLANE and not path.startswith("/resources/"):
        return None
    credential = ctx.credential
    if credential is not None and not credential.reaches(SCOPE):
        raise InsufficientScope(credential.name, SCOPE, door.tokens.realm)
    plane = door.files_plane
    if plane is None:
        raise refuse("no_resource_plane")
    return plane.serve(environ)
