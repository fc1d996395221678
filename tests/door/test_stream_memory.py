"""What an open stream holds while it waits: its client's JSON-RPC id once, as text."""
from __future__ import annotations

import gc
import json
import tracemalloc

from werkzeug.test import EnvironBuilder

from tests.conftest import make_door

ID_CHARS = 2_000_000


def open_watch(door, request_id):
    """A murmur.WatchSession body and its first event; nothing else of the request kept."""
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "murmur.WatchSession",
                       "params": {}})
    builder = EnvironBuilder(method="POST", path="/", data=body, headers={"A2A-Version": "1.0"},
                             content_type="application/json")
    answer = door(builder.get_environ(), lambda status, headers, exc_info=None: None)
    chunks = iter(answer)
    first = next(chunks)
    while not first.endswith(b"\n\n"):
        first += next(chunks)
    return answer, first


def test_a_stream_holds_a_long_id_once_not_encoded_copies():
    """An id as long as the body lets it be was held three times a stream (as text and
    twice encoded) for the stream's life: 42 MB a stream for an id of 16 MB under
    gunicorn. Its events still echo it whole."""
    door = make_door()
    request_id = "i" * ID_CHARS
    try:
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            answer, first = open_watch(door, request_id)
            assert json.loads(first.removeprefix(b"data: "))["id"] == request_id
            del first
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        answer.close()
    finally:
        door.close()
    assert held < 1.5 * ID_CHARS, held
