"""Step 8: the A2A-Version header must name 1.0 (1.0 or 1.0.<digits>)."""
from __future__ import annotations

import logging
import re

from murmur_wsgi.errors import VersionNotSupportedError
from murmur_wsgi.serving.ows import OWS

logger = logging.getLogger(__name__)

_SERVED = re.compile(r"1\.0(\.[0-9]+)?\Z")


def check(environ: dict) -> None:
    """Refuse -32009 unless exactly one A2A-Version line names 1.0."""
    raw = environ.get("HTTP_A2A_VERSION")
    if raw is None:
        raise VersionNotSupportedError("")
    # NOTE: WSGI servers join repeated lines with "," (", " in Werkzeug's test client).
    lines = [part.strip(OWS) for part in raw.split(",")]
    if len(lines) != 1 or not _SERVED.match(lines[0]):
        raise VersionNotSupportedError(",".join(lines))
