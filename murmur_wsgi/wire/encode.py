"""The wire's two compact JSON encoders (no spaces), each declared once.

``compact_ascii`` is the door's: every non-ASCII character escaped, so its
text is ASCII and its length in characters is its length in bytes.
``compact_utf8`` is the hub's (and the door's trace, file listings and
stream prefixes): text as it is, encoded by the caller.

Both write JSON only: NaN and the infinities raise ``ValueError`` instead of
being written as the literals RFC 8259 does not have.
"""
from __future__ import annotations

import json

compact_ascii = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
compact_utf8 = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False,
                                allow_nan=False).encode
