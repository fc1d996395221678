"""Reading an answer's body as it arrives, in bounded pieces.

``requests`` reads a streamed body either to its end at once (a stream the
server never ends, or a chunk that announces a gigabyte) or in fixed blocks
that wait to fill. ``chunks`` reads what has arrived, at most ``READ_SIZE``
bytes at a time (decompressed ones included), so a stream's event is handed
over as soon as its bytes arrive and nothing is held beyond the caller's limits.
``read_body`` reads a whole answer, at most ``max_bytes``, before a deadline;
``loads`` parses it (JSON only: no NaN, Infinity nor a number that overflows a double),
JSON nested past the interpreter's depth included, once its values are counted
(``wire/json_counts.py``): a parse builds an object for each, so 64 MiB of ``[[],[],…]``
would make 1.4 GB of them.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Iterator

import requests
import urllib3

from murmur_wsgi.wire.json_counts import values_in

logger = logging.getLogger(__name__)

READ_SIZE = 64 * 1024


def chunks(response, size: int = READ_SIZE) -> Iterator[bytes]:
    """The body's bytes as they arrive; a broken connection is ``requests.ConnectionError``,
    silence past the read timeout ``requests.ReadTimeout``."""
    while True:
        try:
            # NOTE: decoded here: requests makes its raw response with decoding off, and
            # asks for gzip and deflate; urllib3 decodes at most ``size`` bytes a read.
            data = response.raw.read1(size, decode_content=True)
        except urllib3.exceptions.ReadTimeoutError as ex:
            raise requests.ReadTimeout(ex, response=response) from ex
        except (urllib3.exceptions.HTTPError, OSError) as ex:
            raise requests.ConnectionError(ex, response=response) from ex
        if not data:
            return
        yield data


class BodyTooLarge(ValueError):
    """The body passed its limit."""


class BodyTooSlow(ValueError):
    """The body was still arriving at its deadline."""


def read_body(response, max_bytes: int | None, deadline: float | None) -> bytes:
    """The whole body: ``BodyTooLarge`` past ``max_bytes``, ``BodyTooSlow`` past ``deadline``.

    ``deadline`` is a ``time.monotonic()`` instant; each read waits at most the
    request's read timeout, so a body that trickles ends at most that long after it.
    """
    body = bytearray()
    for data in chunks(response):
        body += data
        if max_bytes is not None and len(body) > max_bytes:
            raise BodyTooLarge(f"more than {max_bytes} bytes")
        if deadline is not None and time.monotonic() > deadline:
            raise BodyTooSlow("still arriving at its deadline")
    return bytes(body)


class TooManyValues(ValueError):
    """The JSON holds more values than its limit: it is not parsed."""


def loads(data: bytes | str, max_values: int | None = None):
    """``json.loads`` of JSON only: NaN, Infinity, a number that overflows a double and
    JSON nested too deep to parse are a ``ValueError``, and JSON of
    more than ``max_values`` values (None: any number) is ``TooManyValues``, unparsed.

    MEMORY: a text of ``max_values`` characters or fewer holds no more values (each takes
    at least one), so it is not counted; a longer one is counted in a few C passes over
    its bytes, each a copy at most as long.
    """
    if max_values is not None and len(data) > max_values:
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        if values_in(raw, max_values) > max_values:
            raise TooManyValues(f"more than {max_values} JSON values")
    try:
        if not isinstance(data, str):          # as json.loads reads bytes
            data = data.decode(json.detect_encoding(data), "surrogatepass")
        return _DECODER.decode(data)
    except RecursionError as ex:
        raise ValueError("JSON nested too deeply") from ex


def _not_json(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (_INF, -_INF):
        raise ValueError(f"{text[:16]} overflows a double")
    return value


_INF = float("inf")
# NOTE: JSON only (RFC 8259): NaN and Infinity are not read, nor a number that overflows a
# double (Python reads 1e400 as infinity): what was read so, ``--json`` wrote back as NaN
# and Infinity, which no script's JSON parser reads. PERF: parse_float is a Python call
# per number with a fraction or an exponent only.
_DECODER = json.JSONDecoder(parse_constant=_not_json, parse_float=_finite)
