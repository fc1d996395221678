"""How deep a JSON value nests: what a reader through protobuf's JSON parser reads back.

An a2a-sdk client reads a task (GetTask, a ListTasks page, a stream's event, a push
notification's body) with protobuf's JSON parser, which stops at 100 levels of
messages; a JSON object or array in a ``Struct`` or ``Value`` is two (the ``Struct``
or ``ListValue``, then its ``Value``). A data part's value past 47 levels (a metadata
past 48) made the whole task unreadable: the hub keeps none deeper than
``MAX_VALUE_DEPTH``, a margin below.
"""
from __future__ import annotations

from murmur_wsgi.turns import turn

MAX_VALUE_DEPTH = 32
_CONTAINERS = (dict, list)
# A level of more values than this is read a slice at a time, the worker's other requests
# given their turn between slices (about 2 ms each).
_SLICE_VALUES = 16384


def nests_deeper(value, max_depth: int) -> bool:
    """Tell whether ``value``'s objects and arrays nest more than ``max_depth`` levels
    (``{}`` and ``[]`` are one), without recursion.

    PERF: a level at a time, its containers gathered by one comprehension: a data part of
    250,000 arrays takes 30 ms, less than its parse; a small value 2 µs. A level of more
    than ``_SLICE_VALUES`` containers or values (``sum`` of their lengths: C speed) gives way every
    10 ms (``murmur_wsgi/turns.py``): a 1 MB body's value held the worker up to 0.2 s."""
    level = [value] if type(value) in _CONTAINERS else []
    ends = 0.0
    for _ in range(max_depth):
        if not level:
            return False
        if len(level) > _SLICE_VALUES or sum(map(len, level)) > _SLICE_VALUES:
            level, ends = _wide_level(level, ends)
            continue
        level = [child for item in level
                 for child in (item.values() if type(item) is dict else item)
                 if type(child) in _CONTAINERS]
    return bool(level)


def _wide_level(level: list, ends: float) -> tuple[list, float]:
    """The containers one level below ``level``'s, gathered a slice at a time, and when the
    turn now ends (``turn``)."""
    below = []
    for start in range(0, len(level), _SLICE_VALUES):
        items = level[start:start + _SLICE_VALUES]
        if sum(map(len, items)) <= _SLICE_VALUES:
            below += [child for item in items
                      for child in (item.values() if type(item) is dict else item)
                      if type(child) in _CONTAINERS]
            ends = turn(ends)
            continue
        for item in items:
            values = list(item.values()) if type(item) is dict else item
            for at in range(0, len(values), _SLICE_VALUES):
                below += [child for child in values[at:at + _SLICE_VALUES]
                          if type(child) in _CONTAINERS]
                ends = turn(ends)
    return below, ends
