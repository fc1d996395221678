"""The wire's two compact JSON encoders (no spaces), each declared once.

``compact_ascii`` is the door's: every non-ASCII character escaped, so its
text is ASCII and its length in characters is its length in bytes.
``compact_utf8`` is the hub's (and the door's trace, file listings and
stream prefixes): text as it is, encoded by the caller.

Both write JSON only: NaN and the infinities raise ``ValueError`` instead of
being written as the literals RFC 8259 does not have. They write what
``json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode`` writes
(``ensure_ascii=False`` for ``compact_utf8``), with one difference: no look for
circular references. What they encode is the wire's own values, built by the
code (an agent's values are encoded, and checked, where they come in:
agents/endings.py); a cycle would end in ``RecursionError``.

PERF: ``JSONEncoder.encode`` makes a C encoder, a dict of markers and a closure
at each call; these make their C encoder once (it holds no state between calls,
and may be used by several threads at once): about 1 µs less per value, nine
values a blocking SendMessage on the hub.
"""
from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring, encode_basestring_ascii

_refuse = json.JSONEncoder().default         # the standard's TypeError for what is not JSON


def _compact(ensure_ascii: bool):
    escape = encode_basestring_ascii if ensure_ascii else encode_basestring
    if c_make_encoder is None:                     # pragma: no cover - CPython has it
        return json.JSONEncoder(separators=(",", ":"), ensure_ascii=ensure_ascii,
                                allow_nan=False).encode
    chunks = c_make_encoder(None, _refuse, escape, None, ":", ",", False, False, False)
    join = "".join

    def encode(value) -> str:
        if isinstance(value, str):
            return escape(value)
        return join(chunks(value, 0))
    return encode


compact_ascii = _compact(True)
compact_utf8 = _compact(False)
# A str as JSON, as ``compact_utf8`` writes it (PERF: the escape itself, no call around it).
utf8_string = encode_basestring


def utf8_bytes(text: str) -> int:
    """The UTF-8 bytes of ``text`` (a lone surrogate counted as its 3). PERF: an ASCII text
    is not encoded."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
