"""The hub's request path: the stream's body written as the door's is (bounded chunks, the
write deadline, the socket's timeout restored)."""
from __future__ import annotations

import json
import socket

from werkzeug.test import EnvironBuilder

from murmur_wsgi.hub.sse import HubStream
from murmur_wsgi.streams.sse import HEARTBEAT, PENDING_BYTES

from tests.hub.conftest import KEY_A, V1, send_params


def test_the_hubs_stream_is_written_in_chunks_of_at_most_pending_bytes():
    big = '{"text":"' + "x" * (3 * PENDING_BYTES) + '"}'
    answers = iter([([big, '{"n":1}'], True)])
    stream = HubStream(1, ['{"task":{}}'], lambda timeout: next(answers), environ={},
                       keepalive=15, write_timeout=10)
    chunks = list(stream)
    assert all(len(chunk) <= PENDING_BYTES for chunk in chunks) and len(chunks) >= 3
    text = b"".join(chunks).decode()
    assert text == ('data: {"jsonrpc":"2.0","id":1,"result":{"task":{}}}\n\n'
                    f'data: {{"jsonrpc":"2.0","id":1,"result":{big}}}\n\n'
                    'data: {"jsonrpc":"2.0","id":1,"result":{"n":1}}\n\n')
    assert stream.finished


def test_the_hubs_stream_beats_and_ends_with_its_lifetime():
    now = [0.0]

    def source(timeout):
        now[0] += timeout
        return [], False

    stream = HubStream("s", [], source, environ={}, keepalive=15, write_timeout=10,
                       lifetime=40, expired={"code": -32000, "message": "old"},
                       clock=lambda: now[0])
    chunks = list(stream)
    assert chunks[:2] == [HEARTBEAT, HEARTBEAT] and len(chunks) == 3
    assert chunks[-1] == b'data: {"jsonrpc":"2.0","id":"s","error":{"code":-32000,' \
                         b'"message":"old"}}\n\n'
    assert now[0] == 40 and stream.finished


def test_the_socket_has_the_write_deadline_during_a_stream_and_its_own_timeout_after(hub):
    """The hub's stream runs under the shared write deadline, and the socket's timeout
    (gunicorn's) comes back when the stream ends, where the hub once set None."""
    left, right = socket.socketpair()
    try:
        left.settimeout(5.0)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                           "params": send_params("a b c")})
        environ = EnvironBuilder(path="/a2a/v1/agents/tokens", method="POST", data=body,
                                 content_type="application/json",
                                 headers={**V1, "X-API-Key": KEY_A}).get_environ()
        environ["gunicorn.socket"] = left
        statuses = []
        answer = hub(environ, lambda status, headers, exc_info=None: statuses.append(status))
        during = []
        chunks = []
        for chunk in answer:
            during.append(left.gettimeout())
            chunks.append(chunk)
        answer.close()
        assert statuses == ["200 OK"]
        assert set(during) == {hub.config.stream["write_timeout_secs"]}
        assert left.gettimeout() == 5.0
        assert b"TASK_STATE_COMPLETED" in b"".join(chunks)
    finally:
        left.close()
        right.close()
