"""The wire's two compact JSON encoders (no spaces), each declared once.

``compact_ascii`` is the door's: every non-ASCII character escaped, so its
text is ASCII and its length in characters is its length in bytes.
``compact_utf8`` is the hub's (and the door's trace, file listings and
stream prefixes): text as it is, encoded by the caller.
"""
from __future__ import annotations

import json

compact_ascii = json.JSONEncoder(separators=(",", ":")).encode
compact_utf8 = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
