"""Parse + validate cost of the worst bodies the door accepts, in µs per MiB.

Times what the door does with a SendMessage body before any task exists: the
depth scan and JSON parse (step 6), the envelope (step 7) and ``read_message``
(step 14's checks), on the shapes that cost the most per byte and are still
accepted under the default limits (1,000 parts, depth 64, 1,000,000 values): the
values a shape's data parts may hold are bounded by ``limits.max_json_values``,
and a body larger than they reach carries its other bytes as one text part of
escapes. Run it from the repository root:

    .venv/bin/python bench/parse.py [--mib 64] [--repeat 3]

(``--mib`` defaults to ``limits.max_body_bytes``.) Then the bodies of millions of
parts that step 6 refuses, in ms of CPU. ``tests/shared/test_linear_time.py``
times the same shapes at two sizes, and the worst of them at the limits.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from murmur_wsgi.door.manifest import load_manifest                    # noqa: E402
from murmur_wsgi.errors import ParseError                              # noqa: E402
from murmur_wsgi.serving.envelope import check_envelope, parse_json  # noqa: E402
from murmur_wsgi.wire.message import read_message                  # noqa: E402

MANIFEST = load_manifest({"name": "bench", "version": "0"})
PARTS = MANIFEST.limits["max_parts"]
DEPTH = MANIFEST.limits["max_json_depth"]
VALUES = MANIFEST.limits["max_json_values"]
BODY = MANIFEST.limits["max_body_bytes"]
DATA_DEPTH = DEPTH - 5                  # the envelope, params, message, parts and a part
ENVELOPE_VALUES = 9                     # envelope 5, message 3 and its parts list


def _envelope(parts: list[str]) -> bytes:
    return ('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":'
            '{"messageId":"m","role":"ROLE_USER","parts":[' + ",".join(parts) + "]}}}").encode()


def _escapes(size: int) -> str:
    """A text part of about ``size`` bytes, every character an escape (\\u00e9 and \\")."""
    return '{"text":"%s"}' % ("\\u00e9\\\"" * max(1, size // 8))


def _data_parts(unit: str, unit_values: int, size: int) -> bytes:
    """``PARTS - 1`` data parts, each an array of ``unit`` (``unit_values`` values), to about
    ``size`` bytes or as many values as ``limits.max_json_values`` leaves, then a text part
    of escapes holding the bytes left."""
    parts = PARTS - 1
    room = VALUES - ENVELOPE_VALUES - 2 * parts - 2        # a part is 2 values, its data too
    each, more = divmod(min(size // (len(unit) + 1), room // unit_values), parts)
    data = ['{"data":[%s]}' % ",".join([unit] * max(1, each + (i < more))) for i in range(parts)]
    left = size - sum(map(len, data)) - parts
    return _envelope(data + [_escapes(left)])


def text_parts(size: int) -> bytes:
    """The most parts, each one text part of plain ASCII."""
    return _envelope(['{"text":"%s"}' % ("x" * max(1, size // PARTS - 11))] * PARTS)


def escaped_text(size: int) -> bytes:
    """One text part, every character an escape (\\u00e9 and \\")."""
    return _envelope([_escapes(size)])


def data_parts_wide(size: int) -> bytes:
    """The most data parts, each an array of the smallest objects."""
    return _data_parts('{"a":0}', 2, size)


def data_deep(size: int) -> bytes:
    """Data parts of arrays nested as deep as the limit allows, side by side."""
    return _data_parts("[" * (DATA_DEPTH - 1) + "]" * (DATA_DEPTH - 1), DATA_DEPTH - 1, size)


def data_strings(size: int) -> bytes:
    """Data parts of short strings holding brackets and quotes (the depth scan's worst)."""
    return _data_parts('"[\\"{"', 1, size)


SHAPES = {"text-parts": text_parts, "escaped-text": escaped_text,
          "data-wide": data_parts_wide, "data-deep": data_deep, "data-strings": data_strings}


def many_parts(size: int, unit: str = '{"data":0}') -> bytes:
    """As many parts of ``unit`` as ``size`` holds: millions, far over the value limit."""
    return _envelope([unit] * max(1, size // (len(unit) + 1)))


# Refused at step 6 (more values than the limit): what a refusal costs before any parse.
REFUSED = {"many-parts": many_parts,
           "many-string-parts": lambda size: many_parts(size, '{"data":"[,"}')}


def refuse(body: bytes) -> None:
    """Step 6 on a body it must refuse (ParseError), or AssertionError."""
    try:
        parse_json(body, DEPTH, VALUES)
    except ParseError:
        return
    raise AssertionError("the body was accepted")


def accept(body: bytes):
    """What the door does with the body before a task exists; the message it reads."""
    payload = parse_json(body, DEPTH, VALUES)
    _, _, params = check_envelope(payload)
    return read_message(params, MANIFEST)


def least_cpu(*calls, repeat: int = 3) -> list[float]:
    """The least CPU time of each of ``calls`` over ``repeat`` turns, one call after another
    in each turn: a change of the machine's load weighs on all of them alike.

    CPU time of this thread (other threads of the process do not count); the objects that
    were alive before are frozen out of the cyclic GC's passes, which would otherwise cost
    in proportion to everything the process holds (a test suite's whole heap).
    """
    best = [float("inf")] * len(calls)
    gc.freeze()
    try:
        for _ in range(repeat):
            for i, call in enumerate(calls):
                started = time.thread_time()
                call()
                best[i] = min(best[i], time.thread_time() - started)
    finally:
        gc.unfreeze()
    return best


def cpu_seconds(body: bytes, repeat: int = 3) -> float:
    """The least CPU time of ``repeat`` runs of ``accept(body)`` (CPU: steady under load)."""
    return least_cpu(lambda: accept(body), repeat=repeat)[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=BODY / 1024 ** 2,
                        help="body size (MiB; default limits.max_body_bytes)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    size = int(args.mib * 1024 ** 2)
    results = {}
    for name, build in SHAPES.items():
        body = build(size)
        seconds = cpu_seconds(body, args.repeat)
        results[name] = seconds * 1e6 / (len(body) / 1024 ** 2)
        print(f"{name:>14}: {len(body) / 1024 ** 2:6.2f} MiB  "
              f"{seconds * 1000:8.1f} ms  {results[name]:10.0f} µs/MiB")
    refused = {}
    for name, build in REFUSED.items():
        body = build(size)
        seconds = least_cpu(lambda: refuse(body), repeat=args.repeat)[0]
        refused[name] = round(seconds * 1000, 1)
        print(f"{name:>17}: {len(body) / 1024 ** 2:6.2f} MiB  {seconds * 1000:8.1f} ms  refused")
    worst = max(results, key=results.get)
    print(json.dumps({"bench": "parse", "mib": args.mib, "worst": worst,
                      "us_per_mib": round(results[worst]),
                      "shapes": {k: round(v) for k, v in results.items()},
                      "refused_ms": refused}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
