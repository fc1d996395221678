"""What the wire reads and writes is JSON any reader can hold: no lone surrogate, no infinity."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur_wsgi.errors import ParseError
from murmur_wsgi.serving.envelope import lone_surrogate, parse_json
from murmur_wsgi.wire.encode import compact_ascii, compact_utf8
from tests.shared.bad_json import DOUBLE_WIDE, WIDE_INTEGERS

# Text with surrogates (lone or next to each other), backslashes and quotes around them.
PIECES = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\U0001f600", "\\", '"',
                          "a", "\u00e9", "u", "d800"])
TEXTS = st.lists(PIECES, max_size=12).map("".join) | st.text()


def has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@settings(max_examples=500, deadline=None)
@given(TEXTS, st.booleans(), st.booleans())
def test_lone_surrogate_reads_what_the_parser_would_make(text, as_key, upper):
    body = json.dumps({text: 1} if as_key else [text])         # every surrogate escaped
    if upper:
        body = re.sub(r"\\u[0-9a-f]{4}", lambda m: m.group(0).upper().replace("\\U", "\\u"),
                      body)
    value = json.loads(body)                    # a pair of halves reads as one character
    made = next(iter(value)) if as_key else value[0]
    assert lone_surrogate(body.encode()) == has_lone_surrogate(made)


@pytest.mark.parametrize("body, lone", [
    (rb'["\ud83d\ude00"]', False),
    (rb'["\ud83d"]', True),
    (rb'["\ude00"]', True),
    (rb'["\\ud800"]', False),                       # an escaped backslash, then text
    (rb'["\\\ud800"]', True),
    (rb'["\ud800\ud800\udc00"]', True),
    (rb'["\ud800\udc00\udc00"]', True),
    (rb'["\ud800", "\udc00"]', True),               # two strings: two lone halves
    (rb'["\ud800\\\udc00"]', True),                # an escaped backslash between halves
])
def test_lone_surrogate_cases(body, lone):
    assert lone_surrogate(body) is lone


@pytest.mark.parametrize("number", ["1e309", "-1e309", "1e999999", "1" + "0" * 400 + ".0",
                                    "-0.1e400", "NaN", "Infinity", "-Infinity"])
def test_a_number_no_double_holds_is_not_json(number):
    with pytest.raises(ParseError):
        parse_json(('{"x":[%s]}' % number).encode())


@pytest.mark.parametrize("number", ["1e308", "1.7976931348623157e308", "1e-400", "-0.0",
                                    "1" + "0" * 400])
def test_a_number_that_fits_is_read(number):
    assert parse_json(('{"x":%s}' % number).encode())["x"] == json.loads(number)


@pytest.mark.parametrize("number", WIDE_INTEGERS)
@pytest.mark.parametrize("size", [0, 9000])          # a small body, and one past the GC pause
def test_with_doubles_an_integer_no_double_holds_is_not_json(number, size):
    body = ('{"pad":"%s","s":"%s","x":[%s]}' % ("p" * size, "9" * 400, number)).encode()
    assert parse_json(body)["x"] == [int(number)]
    with pytest.raises(ParseError):
        parse_json(body, doubles=True)


@pytest.mark.parametrize("value", DOUBLE_WIDE + ["1" + "0" * 300, "1e308"])
def test_with_doubles_the_numbers_a_double_holds_are_read(value):
    body = ('{"s":"%s","x":%s}' % ("9" * 400, value)).encode()
    assert parse_json(body, doubles=True) == {"s": "9" * 400, "x": json.loads(value)}


@pytest.mark.parametrize("encode", [compact_ascii, compact_utf8])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_the_encoders_write_no_nan_nor_infinity(encode, value):
    with pytest.raises(ValueError):
        encode({"x": [value]})
    assert encode({"x": [1.5]}) == '{"x":[1.5]}'


ANY_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | TEXTS,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(TEXTS | st.integers() | st.booleans() | st.none()
                      | st.floats(allow_nan=False), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=500, deadline=None)
@given(ANY_VALUES)
def test_the_encoders_write_what_the_standard_encoder_writes(value):
    """Surrogates, non-ASCII, tuples, and keys of every kind JSON's encoder turns to text
    (an infinite key refused alike)."""
    def outcome(encode):
        try:
            return encode(value)
        except ValueError as ex:
            return ValueError, str(ex)
    for encode, ascii_only in ((compact_ascii, True), (compact_utf8, False)):
        standard = json.JSONEncoder(separators=(",", ":"), ensure_ascii=ascii_only,
                                    allow_nan=False).encode
        assert outcome(encode) == outcome(standard)


@pytest.mark.parametrize("encode", [compact_ascii, compact_utf8])
def test_the_encoders_refuse_what_is_not_json_as_the_standard_encoder_does(encode):
    with pytest.raises(TypeError, match="Object of type bytes is not JSON serializable"):
        encode({"x": b"raw"})
    with pytest.raises(TypeError, match="keys must be str, int, float, bool or None"):
        encode({(1, 2): 1})
    assert encode({"x": [1]}) == '{"x":[1]}'        # nothing left behind by a refusal


def _reference_decode(text: str):
    """What the parser read before it called its scanner itself: the decoder's ``decode``."""
    def reject(name):
        raise ValueError(name)

    def finite(number):
        value = float(number)
        if value in (float("inf"), -float("inf")):
            raise ValueError(number)
        return value
    return json.JSONDecoder(parse_constant=reject, parse_float=finite).decode(text)


WHITESPACE = st.text(alphabet=" \t\n\r", max_size=3)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES, WHITESPACE, WHITESPACE, st.booleans(), st.booleans())
def test_parse_json_reads_every_json_text_as_the_decoder_does(value, before, after, indent,
                                                              ascii_only):
    text = before + json.dumps(value, indent=2 if indent else None,
                               ensure_ascii=ascii_only) + after
    assert parse_json(text.encode()) == _reference_decode(text)


# Fragments of JSON and of what is almost JSON: most texts made of them are not JSON.
FRAGMENTS = st.lists(st.sampled_from(
    [" ", "\n", "\t", "\r", "\u00a0", "\ufeff", "[", "]", "{", "}", '"', ",", ":", "0", "1",
     "-", ".", "e", "+", "true", "false", "null", "NaN", "1e999", "\\", "\\u0041", "x"]),
    max_size=12).map("".join)


@settings(max_examples=600, deadline=None)
@given(FRAGMENTS)
def test_parse_json_refuses_exactly_what_the_decoder_refuses(text):
    try:
        expected = _reference_decode(text)
    except (ValueError, RecursionError):
        with pytest.raises(ParseError):
            parse_json(text.encode())
        return
    assert parse_json(text.encode()) == expected


@pytest.mark.parametrize("body, max_depth, max_values, refused", [
    (b"[1,2,3]", 64, 3, True),                  # four values, in fewer bytes than the depth
    (b"[1,2]", 64, 3, False),
    (b"[[[]]]", 2, 1_000_000, True),            # three levels, in fewer bytes than the values
    (b"[[]]", 2, 1_000_000, False),
    (b" [[]] ", 2, 3, False),
    (b"[[[", 2, 1_000_000, True),               # deeper than the bound in too few bytes
    (b"[[[1]", 2, 1_000_000, True),
])
def test_the_size_shortcuts_never_skip_a_limit_that_applies(body, max_depth, max_values,
                                                            refused):
    if refused:
        with pytest.raises(ParseError):
            parse_json(body, max_depth, max_values)
    else:
        assert parse_json(body, max_depth, max_values) == json.loads(body)
