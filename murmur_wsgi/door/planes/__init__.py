"""The HTTP planes that serve content: the operator plane under /resources/files."""
from __future__ import annotations

from murmur_wsgi.door.planes.files import FilesPlane, check_root

__all__ = ["FilesPlane", "check_root"]
