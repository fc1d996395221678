"""The nesting checks that give way between slices answer exactly as the one-pass ones did.

``nests_deeper`` (wire/depth.py), ``too_deep`` (wire/json_counts.py) and ``fence``'s longest
run of backticks (agents/blocks.py) read a large input a slice at a time; each is compared
here with the one-pass code it replaced, kept below as the oracle, on generated values and
texts, with slices shrunk to a few values so that every input crosses their boundaries.
"""
from __future__ import annotations

import json
import re
from itertools import accumulate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur_wsgi.agents import blocks
from murmur_wsgi.wire import depth, json_counts

# --- the one-pass code, as it was before the slices ---------------------------------------


def old_nests_deeper(value, max_depth: int) -> bool:
    level = [value] if type(value) in (dict, list) else []
    for _ in range(max_depth):
        if not level:
            return False
        level = [child for item in level
                 for child in (item.values() if type(item) is dict else item)
                 if type(child) in (dict, list)]
    return bool(level)


_STEP = [0] * 256
_STEP[ord("[")], _STEP[ord("]")] = 1, -1


def old_too_deep(body: bytes, max_depth: int) -> bool:
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return False
    if b"\\" in body:
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = body.translate(json_counts._FOLD, json_counts._NOT_MARK).replace(b'""', b"")
    if b'"' in marks:
        marks = re.sub(rb'"[^"]*"', b"", marks)
    for level in range(max_depth):
        if not marks:
            return False
        shorter = marks.replace(b"[]", b"")
        if len(shorter) * 4 > len(marks) * 3:
            return max(accumulate(map(_STEP.__getitem__, marks))) > max_depth - level
        marks = shorter
    return bool(marks)


def old_longest_backticks(content: str) -> int:
    return max(map(len, re.findall(r"`+", content)), default=0)


# --- the values and texts ------------------------------------------------------------------

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                     st.sampled_from(['"\\"[[', "[[{{", "]}", "\\", '"', "é[", "\u2028]"]),
                     st.text(alphabet='[]{}"\\ a`é\u00a0', max_size=8))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=6), st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4),
                                                 inner, max_size=6)), max_leaves=60)


def _chain(levels: int, leaf, wide: int = 1):
    """``leaf`` nested ``levels`` deep, each level but the innermost also holding
    ``wide - 1`` empty containers; the levels alternate arrays and objects."""
    value = leaf
    for at in range(levels):
        more = range(wide - 1) if at else ()
        value = [value] + [[] for _ in more] if at % 2 else {"k": value, **{
            str(i): {} for i in more}}
    return value


def _slicings(sizes=(1, 2, 3, 5)):
    """Yield once under each of slices of ``sizes`` values or brackets (small inputs cross
    their boundaries), then once under the real ones."""
    for size in sizes:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(depth, "_SLICE_VALUES", size)
            patch.setattr(json_counts, "_SLICE_MARKS", size)
            yield size
    yield None


@pytest.fixture(params=[1, 2, 3, 5])
def small_slices(request):
    """Slices of a few values or brackets, so that small inputs cross their boundaries."""
    slicings = _slicings((request.param,))
    yield next(slicings)
    next(slicings)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES, max_depth=st.integers(0, 8))
def test_nests_deeper_as_before_on_any_value(value, max_depth):
    for _ in _slicings():
        assert depth.nests_deeper(value, max_depth) == old_nests_deeper(value, max_depth)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES, max_depth=st.integers(0, 8))
def test_too_deep_as_before_on_any_json(value, max_depth):
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        body = text.encode("utf-8", "surrogatepass")
        for _ in _slicings():
            assert json_counts.too_deep(body, max_depth) == old_too_deep(body, max_depth)


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=40) | st.text(alphabet='[]{}"\\,:1 ', max_size=40).map(str.encode),
       max_depth=st.integers(1, 6))
def test_too_deep_as_before_on_any_bytes(body, max_depth):
    """Text that is not JSON included: the parser refuses it anyway, but the answer stays."""
    for _ in _slicings((1, 2, 3)):
        assert json_counts.too_deep(body, max_depth) == old_too_deep(body, max_depth)


@settings(max_examples=500, deadline=None)
@given(content=st.text(alphabet="`a\n é", max_size=200))
def test_longest_backticks_as_before(content):
    assert blocks._longest_backticks(content) == old_longest_backticks(content)


@pytest.mark.parametrize("delta", [-1, 0, 1])
@pytest.mark.parametrize("wide", [1, 3])
def test_depth_at_the_limit_and_either_side(small_slices, delta, wide):
    limit = 6
    value = _chain(limit + delta, 0, wide)
    assert depth.nests_deeper(value, limit) == old_nests_deeper(value, limit) == (delta > 0)
    body = json.dumps(value).encode()
    assert json_counts.too_deep(body, limit) == old_too_deep(body, limit) == (delta > 0)


@pytest.mark.parametrize("top", [0, "[[[[", '"\\"[["', [], {}, [[]], {"a": {}}, None])
def test_scalars_and_empty_containers_at_top(small_slices, top):
    for limit in (0, 1, 2):
        assert depth.nests_deeper(top, limit) == old_nests_deeper(top, limit)
        body = json.dumps(top).encode()
        assert json_counts.too_deep(body, limit) == old_too_deep(body, limit)


def test_huge_flat_levels_at_their_real_slices():
    """A level of 100,000 arrays, one of them deeper, and one object of as many keys."""
    flat = [[] for _ in range(100_000)]
    flat[70_001] = [[[0]]]
    wide_dict = {str(i): [i] for i in range(100_000)}
    for value in (flat, wide_dict, [wide_dict], [flat, {"k": flat}]):
        for limit in (2, 3, 4, 5):
            assert depth.nests_deeper(value, limit) == old_nests_deeper(value, limit)
            body = json.dumps(value).encode()
            assert json_counts.too_deep(body, limit) == old_too_deep(body, limit)
