"""Reading an answer's body as it arrives, in bounded pieces.

``requests`` reads a streamed body either to its end at once (a stream the
server never ends, or a chunk that announces a gigabyte) or in fixed blocks
that wait to fill. ``chunks`` reads what has arrived, at most ``READ_SIZE``
bytes at a time (decompressed ones included), so a stream's event is handed
over as soon as its bytes arrive and nothing is held beyond the caller's limits.
"""
from __future__ import annotations

import logging
from typing import Iterator

import requests
import urllib3

logger = logging.getLogger(__name__)

READ_SIZE = 64 * 1024


def chunks(response, size: int = READ_SIZE) -> Iterator[bytes]:
    """The body's bytes as they arrive; a broken connection is ``requests.ConnectionError``."""
    while True:
        try:
            data = response.raw.read1(size)
        except (urllib3.exceptions.HTTPError, OSError) as ex:
            raise requests.ConnectionError(ex, response=response) from ex
        if not data:
            return
        yield data
