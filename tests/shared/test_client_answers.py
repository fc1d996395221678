"""The client against servers whose answers hold a call past its timeout or answer
another request: a chain of redirects, a JSON-RPC id that is not the request's, a push
config that is not an object.

Each server is a ``Hostile`` (tests/shared/hostile_server.py) on a free loopback port.
"""
from __future__ import annotations

import json
import time

import pytest

from murmur_wsgi.cli import main
from murmur_wsgi.client import A2AClient, ParseError, ProtocolError, ReadTimeout, RpcError
from tests.shared.hostile_server import Hostile, answer, card, run_in_thread

WAIT = 4.0


@pytest.fixture
def cli_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path / "home"))
    for name in ("MURMUR_DOOR_URL", "MURMUR_DOOR_TOKEN", "MURMUR_API_KEY", "MURMUR_TENANT"):
        monkeypatch.delenv(name, raising=False)


def test_a_chain_of_redirects_ends_at_the_calls_timeout():
    """Each redirect is a request of its own, its headers bounded by the read timeout: 30
    of them, each just in time, held one call for 30 timeouts."""
    timeout, hop = 1.0, 0.4

    def redirect(conn, request, server):
        server.stopping.wait(hop)       # each answer late, but within the timeout
        answer(conn, "302 Found", b"",
               extra=f"Location: {server.url}/r{len(server.requests)}\r\n")
    with Hostile(redirect) as door, A2AClient(door.url, timeout=timeout) as client:
        started = time.monotonic()
        finished, value = run_in_thread(client.card, 30 * hop + WAIT)
        took = time.monotonic() - started
    assert finished and isinstance(value, ReadTimeout), value
    assert "did not answer within the timeout" in str(value)
    assert took < 2 * timeout + hop + 1.0, took


def rpc_door(result_for):
    """A server with a card whose every JSON-RPC call is answered ``result_for(request)``:
    ``(id, result)``."""
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        rpc_id, result = result_for(json.loads(request.body))
        answer(conn, "200 OK", json.dumps({"jsonrpc": "2.0", "id": rpc_id,
                                           "result": result}).encode())
    return Hostile(handler)


TASK = {"id": "tsk_1", "contextId": "ctx_1", "status": {"state": "TASK_STATE_COMPLETED"}}


@pytest.mark.parametrize("argv", [("push", "get", "tsk_1", "--config", "c1"),
                                  ("push", "create", "tsk_1", "--to", "http://hook.test/")])
@pytest.mark.parametrize("result,kind", [(None, "null"), ([], "a list"), ("cfg", "a string"),
                                         (7, "a number")])
def test_a_push_config_that_is_not_an_object_is_exit_2(cli_env, capsys, argv, result, kind):
    """GetTaskPushNotificationConfig and Create answer a config: anything else printed
    as it came (``null``) with exit 0. What came is named in words (before, by Python's
    type: "a NoneType", "a str")."""
    with rpc_door(lambda sent: (sent["id"], result)) as door:
        assert main([*argv, "--url", door.url, "--timeout", str(WAIT)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert f"with {kind}, not an object" in captured.err, captured.err


@pytest.mark.parametrize("info,said", [
    ({"reason": ["x"], "metadata": {"requestedVersion": ["x"], "supportedVersions": {"a": 1}}},
     "speaks A2A another version, not the A2A 1.0 this client speaks"),
    ({"reason": "VERSION_NOT_SUPPORTED", "metadata": {"requestedVersion": "1.0",
                                                      "supportedVersions": "0.3"}},
     "speaks A2A 0.3, not the A2A 1.0 this client speaks")])
def test_error_info_fields_that_are_not_strings_are_not_quoted(cli_env, capsys, info, said):
    """google.rpc.ErrorInfo's reason and metadata values are strings: a server's of another
    type is left out of the error (``data`` keeps it), not printed as Python's repr of it
    (before: "speaks A2A {'a': 1}; it received A2A-Version '['x']'")."""
    error = {"code": -32009, "message": "Version not supported",
             "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", **info}]}
    with answering(lambda sent: {"jsonrpc": "2.0", "id": sent, "error": error}) as door:
        assert main(["get", "tsk_1", "--url", door.url, "--timeout", str(WAIT)]) == 2
        with A2AClient(door.url, timeout=WAIT) as client, pytest.raises(RpcError) as raised:
            client.get("tsk_1")
    assert raised.value.data == error["data"]
    assert all(type(v) is str for v in raised.value.metadata.values())
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err
    assert "[" not in err and "{" not in err, err


def sse(result: dict, event_id: str | None, rpc_id=1) -> bytes:
    """One SSE event of ``result``, answering request ``rpc_id`` (no id: ``"none"``)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    body = {"jsonrpc": "2.0", "result": result, **({} if rpc_id == "none" else {"id": rpc_id})}
    return (head + "data: " + json.dumps(body) + "\n\n").encode()


WORKING = {"task": {"id": "tsk_1", "status": {"state": "TASK_STATE_WORKING"}}}
DONE = {"statusUpdate": {"taskId": "tsk_1", "status": {"state": "TASK_STATE_COMPLETED"}}}
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize("odd", ["\u0663", "1_0", " 9", "+9", "9\u00a0"])
def test_an_event_id_not_of_ascii_digits_numbers_nothing(odd):
    """An SSE id is a number only as ASCII digits: int() read '\u0663' (an Arabic 3) and
    '1_0' as 3 and 10, and the next event, numbered 2, was skipped as handed over already:
    the task's completion lost."""
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        conn.sendall(SSE_HEAD + sse(WORKING, "1") + sse(WORKING, odd) + sse(DONE, "2"))
    with Hostile(handler) as door, A2AClient(door.url, timeout=WAIT, max_reconnects=0,
                                             reconnect_delay=0) as client:
        stream = client.subscribe("tsk_1")
        finished, value = run_in_thread(lambda: [e.state for e in stream], WAIT)
    assert finished and value == ["TASK_STATE_WORKING"] * 2 + ["TASK_STATE_COMPLETED"], value
    assert stream.ended == "terminal" and stream.last_event_id == 2


@pytest.mark.parametrize("argv", [("get", "tsk_1"), ("card",), ("send", "--no-wait", "hi")])
def test_a_password_in_the_agents_url_is_never_printed(cli_env, capsys, argv):
    """requests sends a URL's user and password as Basic auth; every error line names the
    agent's URL, and printed the password with it."""
    with Hostile(lambda conn, request, server: answer(conn, "503 Service Unavailable",
                                                      b"down", "text/plain")) as door:
        url = door.url.replace("http://", "http://alice:s3cret-pw@")
        assert main([*argv, "--url", url, "--timeout", str(WAIT)]) == 2
    assert door.requests and door.requests[0].headers.get("authorization", "").startswith(
        "Basic ")
    err = capsys.readouterr().err
    assert "s3cret-pw" not in err and "alice:***@127.0.0.1" in err, err


def answering(body_for):
    """A server with a card whose every JSON-RPC call is answered ``body_for(sent id)``."""
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        answer(conn, "200 OK", json.dumps(body_for(json.loads(request.body)["id"])).encode())
    return Hostile(handler)


OTHER_IDS = {"next": lambda sent: sent + 1, "as-text": str, "as-float": float,
             "as-true": lambda sent: True, "null": lambda sent: None}


RESULT, ERROR = {"result": TASK}, {"error": {"code": -32001, "message": "no such task"}}


# An error with a null id is not among them: the next test.
@pytest.mark.parametrize("other,outcome", [(o, RESULT) for o in [*OTHER_IDS, "none"]]
                         + [(o, ERROR) for o in [*OTHER_IDS, "none"] if o != "null"])
def test_an_answer_naming_another_id_is_exit_2(cli_env, capsys, other, outcome):
    """JSON-RPC 2.0: a response's id is its request's. One naming another (``true`` and
    ``1.0`` are not ``1``), or none, answers another request: it was read as this one's."""
    def body_for(sent):
        body = {"jsonrpc": "2.0", **outcome}
        if other != "none":
            body["id"] = OTHER_IDS[other](sent)
        return body
    with answering(body_for) as door:
        assert main(["get", "tsk_1", "--url", door.url, "--timeout", str(WAIT)]) == 2
        with A2AClient(door.url, timeout=WAIT) as client, pytest.raises(ProtocolError):
            client.get("tsk_1")
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    assert captured.err.count("\n") == 1 and "an answer to another request" in captured.err


def test_an_error_with_a_null_id_is_the_servers_error(cli_env, capsys):
    """A server that could not read the request's id answers its error with ``"id": null``
    (JSON-RPC 2.0): the error is reported as the server's, exit 1."""
    error = {"code": -32700, "message": "Parse error"}
    with answering(lambda sent: {"jsonrpc": "2.0", "id": None, "error": error}) as door:
        assert main(["get", "tsk_1", "--url", door.url, "--timeout", str(WAIT)]) == 1
        with A2AClient(door.url, timeout=WAIT) as client, pytest.raises(ParseError):
            client.get("tsk_1")
    assert "answered -32700: Parse error" in capsys.readouterr().err


def stream_door(ids_for):
    """A server with a card answering every stream with a working event then the task's
    completion, each naming the JSON-RPC id ``ids_for(sent id, connection)`` gives (no
    id at all for ``"none"``); its first connection ends after the working event."""
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        posts = sum(r.method == "POST" for r in server.requests)
        rpc_id = ids_for(json.loads(request.body)["id"], posts)
        events = [WORKING] if posts == 1 else [WORKING, DONE]
        conn.sendall(SSE_HEAD + b"".join(sse(e, None, rpc_id) for e in events))
    return Hostile(handler)


@pytest.mark.parametrize("other", [*OTHER_IDS, "none"])
def test_a_stream_whose_events_name_another_id_is_exit_2(cli_env, capsys, other):
    """Each event of a stream answers its request: one naming another id was handed over."""
    name = OTHER_IDS.get(other, lambda sent: "none")
    with stream_door(lambda sent, posts: name(sent)) as door:
        assert main(["subscribe", "tsk_1", "--url", door.url, "--timeout", str(WAIT)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    assert captured.err.count("\n") == 1 and "an answer to another request" in captured.err


def test_a_resumed_stream_answering_the_first_request_is_a_protocol_error():
    """The resume (SubscribeToTask, request 2) is answered with events naming request 1."""
    with stream_door(lambda sent, posts: 1) as door, \
            A2AClient(door.url, timeout=WAIT, reconnect_delay=0) as client:
        stream = client.subscribe("tsk_1")
        finished, value = run_in_thread(lambda: [e.state for e in stream], WAIT)
        assert finished and isinstance(value, ProtocolError), value
        assert "wrote an event with id 1 on the stream of request 2" in str(value)
        assert [json.loads(r.body)["id"] for r in door.requests if r.body] == [1, 2]


def test_a_resumed_stream_answering_its_own_request_ends():
    with stream_door(lambda sent, posts: sent) as door, \
            A2AClient(door.url, timeout=WAIT, reconnect_delay=0) as client:
        stream = client.subscribe("tsk_1")
        finished, value = run_in_thread(lambda: [e.state for e in stream], WAIT)
    assert finished and value[-1] == "TASK_STATE_COMPLETED" and stream.reconnects == 1, value


NOT_ERRORS = [{"code": "x", "message": "5"}, {"code": -32001}, {"code": True, "message": "m"},
              {"code": 1.5, "message": "m"}, {"code": -32001, "message": 5}, "gone", [1], None]


@pytest.mark.parametrize("error", NOT_ERRORS)
def test_an_error_that_is_no_error_object_is_exit_2(cli_env, capsys, error):
    """JSON-RPC 2.0: an error has an integer code and a text message. Any other read as
    the server's error, exit 1 (``answered x: 5``, ``answered None: …``)."""
    with answering(lambda sent: {"jsonrpc": "2.0", "id": sent, "error": error}) as door:
        assert main(["get", "tsk_1", "--url", door.url, "--timeout", str(WAIT)]) == 2
    def stream_of_the_error(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        body = {"jsonrpc": "2.0", "id": json.loads(request.body)["id"], "error": error}
        conn.sendall(SSE_HEAD + b"data: " + json.dumps(body).encode() + b"\n\n")
    with Hostile(stream_of_the_error) as door:
        assert main(["subscribe", "tsk_1", "--url", door.url, "--timeout", str(WAIT)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    assert captured.err.count("not a JSON-RPC error object (an integer code and a text "
                              "message)\n") == 2, captured.err


def test_a_stream_whose_headers_never_come_ends_at_the_calls_timeout(cli_env, capsys):
    """A stream's headers come within the call's ``timeout``, as any answer's; its events
    then each within ``stream_timeout`` of the last byte. Before, a server that never
    answered a stream held the client ``stream_timeout`` (45 s by default), whatever its
    ``timeout``: ``subscribe --timeout 3`` exited after 45.4 s."""
    def silent_stream(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        server.stopping.wait(WAIT * 4)
    with Hostile(silent_stream) as door:
        with A2AClient(door.url, timeout=0.5, stream_timeout=WAIT * 4,
                       max_reconnects=0) as client:
            started = time.monotonic()
            finished, raised = run_in_thread(lambda: list(client.subscribe("tsk_1")),
                                             WAIT * 2)
            assert finished and isinstance(raised, ReadTimeout), raised
            assert time.monotonic() - started < WAIT
        started = time.monotonic()
        assert main(["subscribe", "tsk_1", "--url", door.url, "--timeout", "0.5"]) == 2
        assert time.monotonic() - started < WAIT
    assert "did not answer within the timeout" in capsys.readouterr().err


def test_a_streams_events_may_be_further_apart_than_the_calls_timeout():
    """… and only its headers: events 0.8 s apart, on a client whose ``timeout`` is 0.3 s,
    are read (the stream's silence is bounded by ``stream_timeout``)."""
    def slow_events(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        rpc_id = json.loads(request.body)["id"]
        conn.sendall(SSE_HEAD + sse(WORKING, None, rpc_id))
        server.stopping.wait(0.8)
        conn.sendall(sse(DONE, None, rpc_id))
    with Hostile(slow_events) as door, \
            A2AClient(door.url, timeout=0.3, stream_timeout=WAIT) as client:
        assert [event.state for event in client.subscribe("tsk_1")] == [
            "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
