"""Numbers a double holds: what a reader that reads every JSON number as a double can read.

JSON sets no bound on a number, and Python reads an integer of any length; but
a2a-sdk (protobuf's ``Struct``) and JavaScript read every number as an IEEE
double, and an integer wider than the widest double (``2`` then 308 zeros) is
an error to them. The hub takes in and keeps only numbers a double holds.

PERF: such an integer is a run of at least ``WIDEST`` digits, found in bytes by
two C passes (``digit_run``); only a text holding such a run is checked number
by number.
"""
from __future__ import annotations

WIDEST = len(str(int(1.7976931348623157e308)))          # 309 digits
_INF = float("inf")
_DIGITS_AS_ZERO = bytes(48 if 48 <= byte <= 57 else 46 for byte in range(256))
_RUN = b"0" * WIDEST
# An integer narrower than this fits; a wider one is converted to be sure.
_SURELY_FITS = 2 ** 1000


def digit_run(data: bytes) -> bool:
    """Tell whether ``data`` holds ``WIDEST`` ASCII digits in a row (in a string or not)."""
    return len(data) >= WIDEST and _RUN in data.translate(_DIGITS_AS_ZERO)


def double_int(text: str) -> int:
    """A JSON integer's text as an int, or ValueError when no double holds it (a ``parse_int``)."""
    if len(text) >= WIDEST and float(text) in (_INF, -_INF):
        raise ValueError(f"{text[:16]}… ({len(text)} digits) overflows a double")
    return int(text)


def wide_integer(value) -> bool:
    """Tell whether the JSON ``value`` (dicts, lists, scalars) holds an integer no double holds.

    Walks ``value`` without recursion.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is int and not -_SURELY_FITS < item < _SURELY_FITS:
            try:
                float(item)
            except OverflowError:
                return True
    return False
