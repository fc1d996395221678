"""Values no JSON text can hold for the door or the hub, and the bodies that carry them.

A lone surrogate, escaped (UTF-8 bytes cannot carry one at all), and numbers that
are not JSON or overflow a double. ``bodies`` puts each in every place a table
names, as a key too, and as the JSON-RPC id and method; ``strict_json`` reads an
answer that must be JSON: UTF-8, no NaN or Infinity, no lone surrogate.
"""
from __future__ import annotations

import json

from tests.shared.json_util import double_int

PARSE_ERROR = {"jsonrpc": "2.0", "id": None,
               "error": {"code": -32700, "message": "Invalid JSON payload"}}
STRINGS = [r'"\ud800"', r'"a\udc00"', r'"\uDBFF\ud800\udc00"', r'"\\\ud800"',
           r'"\ud83d\ude00\ude00"']
NUMBERS = ["1e999999", "-1e400", "1" + "0" * 400 + ".0", "NaN", "-Infinity"]
FITTING = ["1e308", "-1e-400", "1" + "0" * 300, '"\\ud83d\\ude00"', '"\\\\ud800"']
# Integers no double holds: JSON, which the door reads, but the hub refuses (its clients
# read numbers as doubles). And integers as wide as a double holds, which both read.
WIDE_INTEGERS = ["2" + "0" * 308, "-" + "9" * 309, "1" * 4000]
DOUBLE_WIDE = ["1" + "0" * 308, "-179769" + "0" * 303, '"%s"' % ("9" * 400)]
MSG = '"messageId":"m-bad","role":"ROLE_USER"'
TEXT = '"parts":[{"text":"hi"}]'
# The places of a message both applications read (BAD marks the value).
MESSAGE_PLACES = [
    '{"message":{%s,"parts":[{"text":BAD}]}}' % MSG,
    '{"message":{"messageId":BAD,"role":"ROLE_USER",%s}}' % TEXT,
    '{"message":{%s,%s,"contextId":BAD}}' % (MSG, TEXT),
    '{"message":{%s,%s,"taskId":BAD}}' % (MSG, TEXT),
    '{"message":{%s,%s,"referenceTaskIds":[BAD]}}' % (MSG, TEXT),
    '{"message":{%s,%s,"metadata":{"k":BAD}}}' % (MSG, TEXT),
    '{"message":{%s,%s,"metadata":{"k":[{"deep":BAD}]}}}' % (MSG, TEXT),
    '{"message":{%s,"parts":[{"data":{"x":[BAD]}}]}}' % MSG,
    '{"message":{%s,"parts":[{"data":BAD,"mediaType":"application/json"}]}}' % MSG,
    '{"message":{%s,"parts":[{"text":"hi","mediaType":BAD}]}}' % MSG,
    '{"message":{%s,"parts":[{"text":"hi","filename":BAD}]}}' % MSG,
    '{"message":{%s,%s},"configuration":{"returnImmediately":BAD}}' % (MSG, TEXT),
    '{"message":{%s,%s},"metadata":{"k":BAD}}' % (MSG, TEXT),
]


def bodies(places: dict, task_id: str, numbers: list = NUMBERS):
    """(method, body) of every bad value in every place of ``places`` (``BAD`` marks it,
    ``TASK`` stands for ``task_id``), in the params as a key, and as the id and method."""
    for method, templates in places.items():
        for template in templates:
            template = template.replace("TASK", task_id)
            for value in STRINGS + numbers:
                yield method, '{"jsonrpc":"2.0","id":7,"method":"%s","params":%s}' % (
                    method, template.replace("BAD", value))
        for value in STRINGS:
            yield method, '{"jsonrpc":"2.0","id":7,"method":"%s","params":{%s:1}}' % (
                method, value)
            yield method, '{"jsonrpc":"2.0","id":%s,"method":"%s","params":{}}' % (value, method)
        for value in (number for number in numbers if number.lstrip("-").isdigit()):
            yield method, '{"jsonrpc":"2.0","id":%s,"method":"%s","params":{}}' % (value, method)
    for value in STRINGS:
        yield "method", '{"jsonrpc":"2.0","id":7,"method":%s,"params":{}}' % value


def strict_json(data: bytes, doubles: bool = False):
    """``data`` read as JSON that any reader can hold, or AssertionError / ValueError.

    With ``doubles``, every number is one a double holds, integers too (how a2a-sdk's
    protobuf reads them)."""
    def refuse(name):
        raise AssertionError(f"{name} is not JSON")
    value = json.loads(data.decode("utf-8"), parse_constant=refuse,     # strict UTF-8
                       parse_int=double_int if doubles else int)
    # No infinity, and no lone surrogate (UTF-8 cannot encode one).
    json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return value
