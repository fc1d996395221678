"""Steps 6 and 7: the body is JSON, and a JSON-RPC 2.0 request."""
from __future__ import annotations

import gc
import json
import logging
import os
import re
import threading

from murmur_wsgi.errors import InvalidRequestError, ParseError
from murmur_wsgi.keyed_turns import STEP_KEY
from murmur_wsgi.off_loop import off_loop
from murmur_wsgi.wire.doubles import digit_run, double_int
from murmur_wsgi.wire.json_counts import too_deep, values_in

logger = logging.getLogger(__name__)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


_INF = float("inf")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (_INF, -_INF):
        raise ValueError(f"{text[:16]} overflows a double")
    return value


# PERF: parse_float costs a Python call per number with a fraction or an exponent (0.2 s
# for a body of a million of them, the most limits.max_json_values lets in); a body
# without such numbers, the common one, pays nothing. A C-speed scan of the bytes for
# long exponents and digit runs cost more than that on every body.
# PERF: and the decoder's own scanner, called on the text stripped of JSON's whitespace:
# what ``decode`` does (skip whitespace, scan one value, skip whitespace, nothing after),
# without its two Python calls and two regex matches, about a third of a small body's parse.
_scan = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float).scan_once


# The same, with every integer a double must hold too (wire/doubles.py). PERF: used only
# on a body with a run of digits that long.
_scan_doubles = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float,
                                 parse_int=double_int).scan_once
_JSON_WHITESPACE = " \t\n\r"
# A body this large is parsed off gevent's loop (murmur_wsgi/off_loop.py): a megabyte of
# small numbers took one C call of 80-200 ms, every other request of the worker waiting,
# each of one tenant's connections in turn (another tenant's GetTask: 4.4 s with 16). In
# a native thread, the parse gives the loop its turn at each switch interval it spends in
# a number's hook (parse_float, parse_int); a body without hooks to call parses at C
# speed (strings, small integers: 20-30 ms at most for the largest). Below this many
# bytes a parse takes less than a turn (TURN_SECS).
OFF_LOOP_BYTES = 128 * 1024
# A body this short makes too few containers for the cyclic GC to matter.
_GC_PAUSE_BYTES = 8192


# A lone surrogate: a \u escape of a high surrogate not followed by one of a low
# surrogate, or of a low one not preceded by a high one (read once escaped backslashes
# are replaced, so that every \u left is an escape). A pair is one character, and UTF-8
# bytes cannot encode a surrogate at all (the strict decode refuses them).
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile(
    rb"\\u[dD](?:[89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
    rb"|[c-fC-F][0-9a-fA-F]{2}(?<!\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}))")


def lone_surrogate(body: bytes) -> bool:
    """Tell whether the JSON text ``body`` escapes a lone surrogate (``"\\ud800"``).

    Such a string cannot be written as UTF-8 nor stored as text (RFC 8259 leaves
    its meaning unpredictable; I-JSON, RFC 7493, forbids it). PERF: one C search
    over the bytes; the exact one only when a surrogate escape is there at all.
    """
    if _SURROGATE.search(body) is None:
        return False
    return _LONE_SURROGATE.search(_unescaped_backslashes(body)) is not None


def _unescaped_backslashes(body: bytes) -> bytes:
    """``body``, each escaped backslash a ``#``: what stood on either side stays apart."""
    return body.replace(b"\\\\", b"#") if b"\\\\" in body else body


def parse_json(body: bytes, max_depth: int = 64, max_values: int = 1_000_000,
               doubles: bool = False):
    """Step 6: decode the body as UTF-8 JSON, or -32700.

    Only JSON that can be written back is read: NaN and Infinity, a number
    that overflows a double (``1e999999``) and a string escaping a lone
    surrogate (``"\\ud800"``, wherever it sits: a key, a value, an id) are
    refused. JSON of more than ``max_values`` values (``limits.max_json_values``)
    or nested deeper than ``max_depth`` (``limits.max_json_depth``) is refused
    the same way, before it is parsed. With ``doubles``, an integer that
    overflows a double (``2`` and 308 zeros) is refused too: every number must
    be one a double holds, as readers that read numbers as doubles need.
    """
    # PERF: each bound needs bytes: a value at least one of its own, a level of nesting
    # two (its brackets). A body too short to pass a bound is not counted against it (a
    # small request, the common one, counts nothing). Text that nests deeper than the
    # bound in fewer bytes is not JSON: the parser refuses it, at most ``2 * max_depth``
    # levels in (and its recursion limit stops it before a deep stack: RecursionError).
    size = len(body)
    if size > max_values and values_in(body, max_values) > max_values:
        logger.info("refused a body of more values than limits.max_json_values (%d)", max_values)
        raise ParseError()
    if size > 2 * max_depth and too_deep(body, max_depth):
        logger.info("refused a body nested deeper than limits.max_json_depth (%d)", max_depth)
        raise ParseError()
    if 92 in body and lone_surrogate(body):        # 92: a backslash, which every escape has
        logger.info("refused a body escaping a lone surrogate")
        raise ParseError()
    scan = _scan
    if doubles and digit_run(body):
        scan = _scan_doubles
    if size < _GC_PAUSE_BYTES:
        return _decode_text(body, scan)
    if size < OFF_LOOP_BYTES:
        return gc_paused(_decode_text, body, scan)
    return _parse_off_loop(body, scan is _scan_doubles)


def loads_own(text: str):
    """The value of the JSON ``text`` this process wrote (``json.loads``): a copy of the
    value it was written from, with the cyclic GC paused (``gc_paused``) when it is large."""
    if len(text) < _GC_PAUSE_BYTES:
        return json.loads(text)
    return gc_paused(json.loads, text)


def gc_paused(parse, *args):
    """``parse(*args)``, the cyclic GC off meanwhile (in any thread: ``_GcPause``).

    PERF: the cyclic GC runs every 700 containers a parser makes, over all that survive:
    on a body of many small arrays it took 6 times the parse itself. Nothing a parser
    makes is a cycle; the next collection still sees it all."""
    pause = _PAUSES.get("gc") or _gc_pause()
    pause.enter()
    try:
        return parse(*args)
    finally:
        pause.leave()


class _GcPause:
    """The cyclic GC off while any large body is parsed, in any thread; as it was after.

    NOTE: the GC's switch is the process's. Were each parse to read it, turn it off and
    back on as it found it, real threads would leave it off for good: a parse that read it
    off while another's was under way would turn it off after that one turned it back on.
    The first parse reads it, the last one restores it, under ``_lock``: one acquire
    each way, only for a body of ``_GC_PAUSE_BYTES`` or more. One for the process
    (``_gc_pause``)."""

    __slots__ = ("_lock", "_parsing", "_resume")

    def __init__(self):
        self._lock = threading.Lock()
        self._parsing = 0               # guarded by _lock: parses under way
        self._resume = False            # guarded by _lock: the GC was on at the first

    def enter(self) -> None:
        with self._lock:
            if not self._parsing:
                self._resume = gc.isenabled()
                gc.disable()
            self._parsing += 1

    def leave(self) -> None:
        with self._lock:
            self._parsing -= 1
            if not self._parsing and self._resume:
                gc.enable()


_PAUSES: dict = {}          # "gc": the process's one _GcPause, made at its first use


def _gc_pause() -> _GcPause:
    """The process's ``_GcPause``. NOTE: made at the first large body, never at import (no
    lock exists before gevent patches, docs/architecture.md); ``setdefault`` is one atomic
    step, so threads that make one at once all get the same."""
    return _PAUSES.setdefault("gc", _GcPause())


def _decode_text(body: bytes, scan):
    """The one JSON value of the UTF-8 ``body`` (JSON whitespace around it), or -32700."""
    try:
        text = body.decode("utf-8").strip(_JSON_WHITESPACE)
        value, end = scan(text, 0)
    except (UnicodeDecodeError, ValueError, RecursionError, StopIteration):
        raise ParseError() from None
    if end != len(text):
        raise ParseError()                      # more after the value
    return value


def _parse_off_loop(body: bytes, doubles: bool):
    """``_decode_own`` off the loop, one at a time in the process, each step key (the
    hub's tenant) waiting with one parse at most: four of one tenant's parses at once held
    the GIL four ways, and the loop, which takes it back at each switch interval, waited
    behind each (another tenant's GetTask: p50 0.09 s with four connections); a tenant's
    many parses wait behind its own line, so another tenant's waits one parse at most.

    NOTE: the GC paused once the parse starts, not while it waits its turn: the parses one
    after another leave it on between them (paused across overlapping parses, it stayed
    off for every other request while two tenants posted large bodies)."""
    key = STEP_KEY.get()
    line = _PARSING.get(key) or _PARSING.setdefault(key, threading.Lock())
    with line:
        with _PARSING.get(_ONE) or _PARSING.setdefault(_ONE, threading.Lock()):
            return gc_paused(off_loop, _decode_own, body, doubles)


# A lock for each step key that parsed a large body, and the process's (``_ONE``), made at
# their first use: none exists before gevent patches threading (docs/architecture.md).
_PARSING: dict = {}
_ONE = object()


def _forked() -> None:
    """A forked child starts with no lock taken, and with the GC as it was before a parse
    the fork interrupted (another greenlet forked while a parse was under way)."""
    _PARSING.clear()
    pause = _PAUSES.pop("gc", None)
    if pause is not None and pause._parsing and pause._resume:
        gc.enable()


os.register_at_fork(after_in_child=_forked)


def _decode_own(body: bytes, doubles: bool):
    """``_decode_text`` with a scanner of its own: off the loop, in a native thread, the
    module's would be shared with another parse under way (its keys' memo)."""
    decoder = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float,
                               parse_int=double_int if doubles else None)
    return _decode_text(body, decoder.scan_once)


# A JSON-RPC id either application echoes: a string or an integer (a boolean is not one:
# the parser makes only these exact types, and True's type is bool).
_ID_TYPES = (str, int)


def valid_id(value) -> bool:
    """A JSON-RPC id the applications echo: a string or an integer (not a boolean)."""
    return type(value) in _ID_TYPES


class EnvelopeError(InvalidRequestError):
    """-32600 carrying the id to echo (None when the id itself is not valid)."""

    def __init__(self, request_id):
        super().__init__()
        self.request_id = request_id


def check_envelope(payload) -> tuple:
    """Step 7: return (id, method, params) of a JSON-RPC 2.0 request, or -32600."""
    if not isinstance(payload, dict):
        raise EnvelopeError(None)                   # a batch array, or a bare value
    request_id = payload.get("id")
    echo = request_id if type(request_id) in _ID_TYPES else None   # PERF: valid_id, inline
    if payload.get("jsonrpc") != "2.0" or "id" not in payload or echo is None:
        raise EnvelopeError(echo)
    method = payload.get("method")
    if not isinstance(method, str):
        raise EnvelopeError(echo)
    return request_id, method, payload.get("params", _ABSENT)


class _Absent:
    """params omitted: reads as {}."""

    def __repr__(self):
        return "<absent>"


_ABSENT = _Absent()
ABSENT = _ABSENT
