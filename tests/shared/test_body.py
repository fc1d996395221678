"""The shared body reader: bounded, and never a read the server did not say would end."""
from __future__ import annotations

import io
import json

import pytest

from murmur_wsgi.serving.body import BodyUnreadable, PastHostsLimit, read_body


class _NoRead(io.BytesIO):
    def read(self, *args):
        raise AssertionError("read a body whose end the server did not promise")


def _environ(data: bytes, **extra) -> dict:
    return {"wsgi.input": io.BytesIO(data), **extra}


def test_a_declared_body_is_read_to_its_length():
    assert read_body(_environ(b'{"a":1}xyz', CONTENT_LENGTH="7"), 100) == b'{"a":1}'
    assert read_body(_environ(b'{"a":1}xyz', CONTENT_LENGTH=" 7\t"), 100) == b'{"a":1}'


def test_a_declared_body_over_the_limit_is_refused_before_a_byte_is_read():
    assert read_body({"wsgi.input": _NoRead(), "CONTENT_LENGTH": "101"}, 100) is None


@pytest.mark.parametrize("length", ["", "0", "abc", "7\xa0", "\x857", "+7", "0_7", "\u0667",
                                    "9" * 5000])
def test_no_body_or_an_unreadable_length_reads_as_none(length):
    assert read_body({"wsgi.input": _NoRead(), "CONTENT_LENGTH": length}, 100) == b""


def test_without_a_length_nothing_is_read_unless_the_input_is_terminated():
    assert read_body({"wsgi.input": _NoRead()}, 100) == b""


def test_a_terminated_input_is_read_up_to_the_limit():
    assert read_body(_environ(b"x" * 100, **{"wsgi.input_terminated": True}), 100) == b"x" * 100
    assert read_body(_environ(b"x" * 101, **{"wsgi.input_terminated": True}), 100) is None


def test_a_declared_body_that_ends_before_its_length_is_unreadable():
    """The connection ended (or was cut at the body deadline) before the Content-Length's
    bytes came: the request is incomplete (RFC 9112, section 8) and is not answered as if
    its body were whole. Before, the bytes that came were read as the body: a valid JSON
    prefix started a task."""
    with pytest.raises(BodyUnreadable, match="7 of 57 bytes"):
        read_body(_environ(b'{"a":1}', CONTENT_LENGTH="57"), 100)


def test_a_transfer_encoding_overrides_the_content_length():
    """RFC 9112, section 6.3: with both, Transfer-Encoding decides the body. Werkzeug's server
    passes both (it dechunks, and says so with ``wsgi.input_terminated``); the declared
    length was read instead: 5 bytes of the call (-32700), or, past the body's end, all of
    it and the stream's end read as if it came."""
    call = b'{"jsonrpc":"2.0","id":1}'
    chunked = {"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input_terminated": True}
    assert read_body(_environ(call, CONTENT_LENGTH="5", **chunked), 100) == call
    assert read_body(_environ(call, CONTENT_LENGTH="500", **chunked), 100) == call
    assert read_body(_environ(b"x" * 101, CONTENT_LENGTH="5", **chunked), 100) is None


class _Dribble:
    """An input whose ``read(n)`` gives at most ``step`` bytes a call, as a server may."""

    def __init__(self, data: bytes, step: int):
        self.data, self.step = data, step

    def read(self, n: int = -1) -> bytes:
        taken, self.data = self.data[:min(n, self.step)], self.data[min(n, self.step):]
        return taken


def test_a_declared_body_read_in_several_reads_is_whole():
    """A WSGI server may give fewer bytes than asked and more on the next read (PEP 3333
    leaves ``read(size)`` to the server): only an empty read is the body's end."""
    body = b'{"jsonrpc":"2.0","id":1,"method":"GetTask"}'
    environ = {"wsgi.input": _Dribble(body + b"next", 5), "CONTENT_LENGTH": str(len(body))}
    assert read_body(environ, 100) == body
    with pytest.raises(BodyUnreadable, match="4 of 9 bytes"):
        read_body({"wsgi.input": _Dribble(b"abcd", 3), "CONTENT_LENGTH": "9"}, 100)


def test_a_declared_body_whose_client_reset_the_connection_is_unreadable():
    """A client that resets its connection before its Content-Length's bytes came (a real
    TCP reset): the server's read raises ConnectionResetError. Before, that went up to
    the hub as its own failure (a traceback logged, "failed inside the hub"); now it is
    the client's, as a body that ended early."""
    import socket
    import struct

    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname(), timeout=10)
        conn, _ = listener.accept()
        with conn, conn.makefile("rb") as stream:
            conn.settimeout(10)
            client.sendall(b'{"jsonrpc"')
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
            with pytest.raises(BodyUnreadable):
                read_body({"wsgi.input": stream, "CONTENT_LENGTH": "1000"}, 2000)


def test_a_terminated_body_read_in_several_reads_is_whole():
    """Without a Content-Length (chunked, ``wsgi.input_terminated``) the body was one read:
    an input giving fewer bytes than asked (a host's wrapper of it) cut a valid call to its
    first bytes, answered -32700. Only an empty read is the end, and the limit still holds."""
    body = b'{"jsonrpc":"2.0","id":1,"method":"GetTask"}'
    terminated = {"wsgi.input_terminated": True}
    assert read_body({"wsgi.input": _Dribble(body, 3), **terminated}, 100) == body
    assert read_body({"wsgi.input": _Dribble(b"x" * 100, 7), **terminated}, 100) == b"x" * 100
    assert read_body({"wsgi.input": _Dribble(b"x" * 101, 7), **terminated}, 100) is None


def test_a_declared_body_whose_wrapped_input_raises_is_unreadable():
    """A host may hand its own wrapper of the input (Flask's ``request.stream``, Werkzeug's
    ``LimitedStream``), which says a body ended early with its own error
    (``ClientDisconnected``): it went up as the application's failure (the hub answered
    200 -32603 and logged a traceback "failed inside the hub"); it is the client's body that
    ended early, as a connection reset is."""
    from werkzeug.wsgi import LimitedStream

    call = b'{"jsonrpc":"2.0","id":1,"method":"GetTask"}'
    environ = {"wsgi.input": LimitedStream(io.BytesIO(call[:10]), len(call)),
               "CONTENT_LENGTH": str(len(call))}
    with pytest.raises(BodyUnreadable, match=f"ended after 10 of {len(call)} bytes"):
        read_body(environ, 100)


def test_an_input_failure_without_text_is_named_by_its_class():
    """An input that fails with an error holding no text (``OSError()``) left the hub's
    message ending in "bytes: ", naming nothing."""
    call = b'{"jsonrpc":"2.0","id":1,"method":"GetTask"}'
    class Failing(_Dribble):
        def read(self, n: int = -1) -> bytes:
            if len(self.data) < len(call):
                raise OSError()
            return super().read(n)

    environ = {"wsgi.input": Failing(call, 10), "CONTENT_LENGTH": str(len(call))}
    with pytest.raises(BodyUnreadable) as refused:
        read_body(environ, 100)
    assert str(refused.value) == f"the body ended after 10 of {len(call)} bytes: OSError"


class _Exhausted(io.RawIOBase):
    """An input whose second read fails as the process does: out of memory or stack."""

    def __init__(self, data: bytes, failure: BaseException):
        self._data, self._failure, self._reads = io.BytesIO(data), failure, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        self._reads += 1
        if self._reads > 1:
            raise self._failure
        chunk = self._data.read(min(len(buffer), 5))
        buffer[:len(chunk)] = chunk
        return len(chunk)


@pytest.mark.parametrize("failure", [MemoryError, RecursionError])
@pytest.mark.parametrize("way", [{"CONTENT_LENGTH": "43"}, {"wsgi.input_terminated": True}],
                         ids=["content-length", "terminated"])
def test_a_read_that_runs_out_of_memory_is_the_servers_failure(way, failure):
    """Memory or the stack running out is the process's, not the client's body: it was
    taken as a body that cannot be read (the hub answered 400 'the request body cannot be
    read', logged at INFO), and goes up as the application's failure."""
    call = b'{"jsonrpc":"2.0","id":1,"method":"GetTask"}'
    with pytest.raises(failure):
        read_body({"wsgi.input": _Exhausted(call, failure()), **way}, 100)


def test_the_hub_answers_a_read_out_of_memory_as_its_own_failure(caplog):
    """The hub's wire for it: 200 -32603 and a traceback logged, as any failure inside it;
    it answered 400 -32600, blaming the client's body."""
    from werkzeug.test import EnvironBuilder, run_wsgi_app

    from murmur_wsgi.hub import create_hub
    from tests.hub.conftest import KEY_A, close_hub, hub_config

    call = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}'
    hub = create_hub(hub_config())
    builder = EnvironBuilder(path="/a2a/v1/agents/echo", method="POST", data=call,
                             headers={"X-API-Key": KEY_A, "A2A-Version": "1.0"},
                             content_type="application/json")
    try:
        environ = builder.get_environ()
        environ["wsgi.input"] = _Exhausted(call, MemoryError())
        body, status, _ = run_wsgi_app(hub, environ, buffered=True)
        answer = json.loads(b"".join(body))
    finally:
        builder.close()
        close_hub(hub)
    assert (status, answer["error"]["code"]) == ("200 OK", -32603)
    assert any(record.levelname == "ERROR" and record.exc_info for record in caplog.records)


def test_a_declared_body_past_a_host_wrappers_limit_is_too_large():
    """A host's wrapper bounding the body below its Content-Length (Werkzeug's
    ``LimitedStream`` as a maximum) raises ``RequestEntityTooLarge`` past it: that was a body
    that cannot be read; it is one too large, past the host's limit, which the stream says
    (it read as one past ``limits.max_body_bytes``, whose number the hub named)."""
    from werkzeug.wsgi import LimitedStream

    call = b'{"jsonrpc":"2.0","id":1,"method":"GetTask"}'
    environ = {"wsgi.input": LimitedStream(io.BytesIO(call), 10, is_max=True),
               "CONTENT_LENGTH": str(len(call))}
    with pytest.raises(PastHostsLimit) as refused:
        read_body(environ, 100)
    assert refused.value.limit == 10


@pytest.mark.parametrize("way", [{"CONTENT_LENGTH": "43"}, {"wsgi.input_terminated": True}],
                         ids=["content-length", "terminated"])
def test_a_hosts_refusal_that_names_no_limit_is_past_an_unknown_one(way):
    """A host's input raising an HTTP error of code 413 of its own (not a stream that says
    its limit): past the host's limit, of no number known."""
    from werkzeug.exceptions import RequestEntityTooLarge

    class Refusing(_Dribble):
        def read(self, n: int = -1) -> bytes:
            if not self.data:
                raise RequestEntityTooLarge()
            return super().read(n)

    with pytest.raises(PastHostsLimit) as refused:
        read_body({"wsgi.input": Refusing(b"x" * 10, 4), **way}, 100)
    assert refused.value.limit is None


@pytest.mark.parametrize("chunks", [b"41\r\nab", b"f" * 99 + b"\r\nab",
                                    b"3\r\nabc\r\n41\r\n" + b"x" * 10])
def test_a_chunk_shorter_than_its_size_on_werkzeugs_server_is_unreadable(chunks):
    """Werkzeug's server dechunks the input itself (``DechunkedInput``, a raw stream). Its
    ``read`` handed ``readinto`` a bytearray, which a chunk that came short of its size
    shrank, then copied the size asked from the shrunk buffer: the limit's bytes from past
    its end (None: "too large"; a chunk size past a 1 MiB limit killed the server with
    SIGSEGV)."""
    from werkzeug.serving import DechunkedInput

    stream = DechunkedInput(io.BufferedReader(io.BytesIO(chunks)))
    with pytest.raises(BodyUnreadable):
        read_body({"wsgi.input": stream, "wsgi.input_terminated": True,
                   "HTTP_TRANSFER_ENCODING": "chunked"}, 64)


def test_a_chunked_body_on_werkzeugs_server_is_read_whole():
    from werkzeug.serving import DechunkedInput

    data = b"x" * 70_000
    chunks = b"%x\r\n%s\r\n3\r\nabc\r\n0\r\n\r\n" % (len(data), data)
    stream = DechunkedInput(io.BufferedReader(io.BytesIO(chunks)))
    assert read_body({"wsgi.input": stream, "wsgi.input_terminated": True,
                      "HTTP_TRANSFER_ENCODING": "chunked"}, 100_000) == data + b"abc"


@pytest.mark.parametrize("data", [b"x" * 10, b"x" * 11, b"x" * 400])
def test_a_terminated_body_of_exactly_its_hosts_limit_is_whole(data):
    """Werkzeug's ``LimitedStream`` bounding a body by a maximum (Flask's
    ``MAX_CONTENT_LENGTH``) raises ``RequestEntityTooLarge`` at a read at its limit, whether
    the body ended there or has more: a body of exactly the limit was refused. The input
    under it, terminated, tells them apart; a body past the limit is still refused."""
    from werkzeug.wsgi import LimitedStream

    stream = LimitedStream(io.BytesIO(data), 10, is_max=True)
    environ = {"wsgi.input": stream, "wsgi.input_terminated": True}
    if len(data) == 10:
        assert read_body(environ, 100) == data
    else:
        with pytest.raises(PastHostsLimit):
            read_body(environ, 100)


@pytest.mark.parametrize("after", [b"0\r\n\r\n", b"1\r\ny\r\n0\r\n\r\n", b"zz\r\n", b""],
                         ids=["last-chunk", "one-more", "broken", "cut"])
def test_a_chunked_body_at_its_hosts_limit_on_werkzeugs_server(after):
    """On Werkzeug's server (``DechunkedInput`` under Flask's stream): a body whose last
    chunk comes at the host's limit is whole; a byte more is past it; framing that breaks
    right there, or a connection that ends before the last chunk, is a body that cannot be
    read, never a whole one."""
    from werkzeug.serving import DechunkedInput
    from werkzeug.wsgi import LimitedStream

    raw = DechunkedInput(io.BufferedReader(io.BytesIO(b"a\r\n" + b"x" * 10 + b"\r\n" + after)))
    environ = {"wsgi.input": LimitedStream(raw, 10, is_max=True), "wsgi.input_terminated": True,
               "HTTP_TRANSFER_ENCODING": "chunked"}
    if after.startswith(b"0"):
        assert read_body(environ, 100) == b"x" * 10
    elif after.startswith(b"1"):
        with pytest.raises(PastHostsLimit):
            read_body(environ, 100)
    else:
        with pytest.raises(BodyUnreadable):
            read_body(environ, 100)


@pytest.mark.parametrize("outer", [10, 20], ids=["same-limit", "larger-outside"])
@pytest.mark.parametrize("data", [b"x" * 10, b"x" * 11], ids=["at-the-limit", "past-it"])
def test_a_hosts_stream_bounded_again(data, outer):
    """A host's stream handed on as another's input and bounded again (Flask's stream of a
    view under another's; the inner ``MAX_CONTENT_LENGTH`` 10): the inner one refuses a
    read at its limit. A body of exactly that limit was refused, 413 (the outer one not at
    its own limit), or read past the inner one's refusal, a body that cannot be read (the
    hub's 400, the door's -32603), one past it too; now the first is whole, the second past
    the host's limit of 10 bytes."""
    from werkzeug.wsgi import LimitedStream

    inner = LimitedStream(io.BytesIO(data), 10, is_max=True)
    environ = {"wsgi.input": LimitedStream(inner, outer, is_max=True),
               "wsgi.input_terminated": True, "HTTP_TRANSFER_ENCODING": "chunked"}
    if len(data) == 10:
        assert read_body(environ, 100) == data
    else:
        with pytest.raises(PastHostsLimit) as refused:
            read_body(environ, 100)
        assert refused.value.limit == 10
