"""A JSON text's values and nesting, counted from its bytes without parsing it.

Parsing builds a Python object for every value: 64 MiB of ``[[],[],…]`` is about 22
million lists, 1.4 GB. What reads untrusted JSON bounds it first, in time linear in the
bytes and without recursion: the servers a request's body (``serving/envelope.py``,
``limits.max_json_values`` and ``limits.max_json_depth``), the client an answer's
(``client/body.py``, ``max_answer_values``).
"""
from __future__ import annotations

import re
from itertools import accumulate

from murmur_wsgi.turns import turn

# Every byte but the brackets and the quote; { and } read as [ and ].
_NOT_MARK = bytes(range(256)).translate(None, b'[]{}"')
_FOLD = bytes.maketrans(b"{}", b"[]")
_STRING = re.compile(rb'"[^"]*"')
_STEP = [0] * 256
_STEP[ord("[")], _STEP[ord("]")] = 1, -1
_SLICE_MARKS = 65536        # brackets counted between two turns (about 3 ms)


def _unescaped(body: bytes) -> bytes:
    """``body`` without its escaped backslashes, then its escaped quotes: each quote left delimits."""
    if b"\\" in body:
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    return body


def _containers_at_most(body: bytes) -> int:
    """The number of objects and arrays in ``body``, or more (brackets in strings count)."""
    return body.count(b"[") + body.count(b"{")


def too_deep(body: bytes, max_depth: int) -> bool:
    """Tell whether the JSON in ``body`` nests objects and arrays deeper than ``max_depth``.

    Reads the bytes without parsing them and without recursion, in time linear
    in the body. Exact for valid JSON; what it says of invalid JSON does not
    matter, the parser refuses that anyway.
    """
    # PERF: every step is one pass of C code over bytes; most bodies stop at the first.
    if _containers_at_most(body) <= max_depth:
        return False
    body = _unescaped(body)
    marks = body.translate(_FOLD, _NOT_MARK).replace(b'""', b"")
    if b'"' in marks:
        marks = _STRING.sub(b"", marks)         # the strings that hold brackets
    # Each pass drops the innermost pairs: one level off the deepest nesting.
    for level in range(max_depth):
        if not marks:
            return False
        shorter = marks.replace(b"[]", b"")
        if len(shorter) * 4 > len(marks) * 3:   # shrinking slowly: count the rest instead
            if len(marks) <= _SLICE_MARKS:
                return max(accumulate(map(_STEP.__getitem__, marks))) > max_depth - level
            return _deepest(marks) > max_depth - level
        marks = shorter
    return bool(marks)


def _deepest(marks: bytes) -> int:
    """How deep the brackets ``marks`` nest, counted ``_SLICE_MARKS`` at a time.

    PERF: a count of a 1 MB body's brackets held the worker 20-50 ms: it gives the worker's
    other requests their turn (``murmur_wsgi/turns.py``) between slices; each slice's last
    depth is its brackets' balance (C speed). The passes before it need none: each drops
    a quarter of the marks or more, all of them about four passes of C code."""
    deepest = depth = 0
    ends = 0.0
    for start in range(0, len(marks), _SLICE_MARKS):
        piece = marks[start:start + _SLICE_MARKS]
        deepest = max(deepest, max(accumulate(map(_STEP.__getitem__, piece), initial=depth)))
        depth += piece.count(b"[") - piece.count(b"]")
        ends = turn(ends)
    return deepest


# What a value is, for the count: brackets (folded), commas, colons, quotes and the first
# bytes of numbers and literals (as 0); every other byte is dropped.
_NOT_VALUE = bytes(range(256)).translate(None, b'[]{}",:-0123456789tfn')
_VALUE = bytes.maketrans(b"{}-123456789tfn", b"[]0000000000000")


def values_in(body: bytes, max_values: int) -> int:
    """The number of JSON values in ``body``, or any number ``<= max_values`` when it is not more.

    A value is an object, an array, a string, a number, true, false or null,
    wherever it sits; an object's keys are not values. Reads the bytes without
    parsing them, in time linear in the body: one value, plus one per comma
    and per non-empty object or array, outside strings. Of valid JSON of more
    than ``max_values`` values, a number above ``max_values`` (not always the
    count: ``count_values`` counts exactly).
    """
    # PERF: the raw counts bound the exact one from above; most bodies stop here.
    bound = 1 + body.count(b",") + _containers_at_most(body)
    if bound <= max_values:
        return bound
    body = _unescaped(body)
    # PERF: and the quotes from below (every string is a value or an object's key, and
    # every key has a value): a body of millions of small parts stops here, at C speed.
    least = body.count(b'"') // 4
    if least > max_values:
        return least
    return _count_values(body)


def count_values(body: bytes) -> int:
    """The number of JSON values in ``body``, however many (``values_in`` without a bound)."""
    return _count_values(_unescaped(body))


def _count_values(body: bytes) -> int:
    """``count_values`` of a body ``_unescaped`` already."""
    marks = body.translate(_VALUE, _NOT_VALUE)
    if b'"' in marks:
        # A closing quote is followed by a colon, a comma or a bracket, all kept: every ""
        # left is an empty string, or one without marks. PERF: replaced at C speed; only
        # the strings holding marks are left for the slower regex.
        marks = marks.replace(b'""', b"0")
        if b'"' in marks:
            marks = _STRING.sub(b"0", marks)    # a string is one value; its bytes are none
    return 1 + marks.count(b",") + marks.count(b"[") - marks.count(b"[]")
