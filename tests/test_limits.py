"""limits.*: what one request may ask of the door, refused before the work it bounds."""
from __future__ import annotations

import json

import pytest
from werkzeug.test import EnvironBuilder, run_wsgi_app

from tests.conftest import V1, Rpc, make_door

SMALL = {"limits": {"max_body_bytes": 4096},
         "context": {"images": {"max_bytes": 1024, "max_per_turn": 2}}}
TOO_LARGE = [("jsonrpc", "2.0"), ("id", None),
             ("error", [("code", -32600), ("message", "Request payload validation error")])]


class CountingInput:
    """A request body of ``size`` bytes (``None``: endless) that counts what is read of it."""

    def __init__(self, size: int | None):
        self.size = size
        self.taken = 0

    def read(self, n: int = -1) -> bytes:
        left = (1 << 62 if self.size is None else self.size) - self.taken
        n = left if n is None or n < 0 else min(n, left)
        if n > 1 << 30:
            raise AssertionError("the door read a body to its end")
        self.taken += n
        return b" " * n


def post_stream(door, stream, content_length: int | None):
    """POST / with ``stream`` as wsgi.input; Content-Length as given, else chunked."""
    environ = EnvironBuilder(path="/", method="POST", headers=V1,
                             content_type="application/json").get_environ()
    environ["wsgi.input"] = stream
    if content_length is None:
        environ.pop("CONTENT_LENGTH", None)
        environ["wsgi.input_terminated"] = True
    else:
        environ["CONTENT_LENGTH"] = str(content_length)
    body, status, headers = run_wsgi_app(door, environ)
    return status, dict(headers), b"".join(body)


def assert_too_large(status, headers, data):
    assert status == "413 Content Too Large"
    assert headers["Content-Type"] == "application/json"
    assert headers["Content-Length"] == str(len(data))
    assert json.loads(data, object_pairs_hook=list) == TOO_LARGE


# --- limits.max_body_bytes -------------------------------------------------------------


def test_declared_body_over_the_limit_is_413_before_a_byte_is_read():
    stream = CountingInput(None)
    assert_too_large(*post_stream(make_door(), stream, 1 << 40))       # a TiB declared
    assert stream.taken == 0


def test_declared_body_one_over_a_small_limit_is_413_unread():
    stream = CountingInput(4097)
    assert_too_large(*post_stream(make_door(**SMALL), stream, 4097))
    assert stream.taken == 0


def test_undeclared_body_is_refused_as_the_read_passes_the_limit():
    stream = CountingInput(None)                       # chunked, and it never ends
    assert_too_large(*post_stream(make_door(**SMALL), stream, None))
    assert stream.taken == 4097


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_at_the_limit_is_read_whole_not_cut(chunked):
    request = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "GetTask",
                          "params": {"id": "tsk_none"}})
    body = request + " " * (4096 - len(request))
    environ = EnvironBuilder(path="/", method="POST", headers=V1, data=body,
                             content_type="application/json").get_environ()
    if chunked:
        environ.pop("CONTENT_LENGTH")
        environ["wsgi.input_terminated"] = True
    out, status, _ = run_wsgi_app(make_door(**SMALL), environ)
    assert status == "200 OK"
    assert json.loads(b"".join(out))["error"]["code"] == -32001      # read whole, not cut


def test_the_largest_image_payload_fits_the_default_body():
    door = make_door()
    images = door.manifest.context["images"]
    payload = -(-images["max_bytes"] // 3) * 4 * images["max_per_turn"]
    assert payload + 1024 ** 2 < door.manifest.limits["max_body_bytes"] == 64 * 1024 ** 2
