"""The client against hostile or broken servers: real sockets scripted byte by byte.

Each server is a ``Hostile`` (tests/shared/hostile_server.py) on a free loopback
port. What is checked: a credential never leaves the origin the caller named, no
answer grows the client's memory without bound or holds it past its timeouts, and
a malformed answer is one of the client's errors, never a traceback.
"""
from __future__ import annotations

import io
import itertools
import json
import sys
import threading
import time
import tracemalloc

import pytest

from murmur_wsgi.client import A2AClient, HttpRefusal, ProtocolError, ReadTimeout, render
from murmur_wsgi.client.card import same_origin
from murmur_wsgi.client.events import StreamEvent
from murmur_wsgi.client.progress import Spinner
from murmur_wsgi.client.seen import Recent
from murmur_wsgi.client.sse import EventTooLarge, SseEvent, SseParser
from murmur_wsgi.client.streams import MAX_GAPS
from murmur_wsgi.cli import main
from murmur_wsgi.uris import DOOR_URI, STREAM_URI
from tests.shared.hostile_server import (Hostile, answer, card, read_request, request_id,
                                         rpc_answer, run_in_thread)

DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024     # A2AClient's max_answer_bytes

WAIT = 4.0
SECRETS = {"authorization", "x-api-key", "x-tenant-id", "x-secret"}


def credentialed(url: str, **options) -> A2AClient:
    return A2AClient(url, token="tok-1", api_key="key-1", tenant="t-1",
                     headers={"X-Secret": "s-1"}, timeout=WAIT, **options)


def leaked(server: Hostile) -> set:
    return {name for r in server.requests for name in r.headers if name in SECRETS}


@pytest.mark.parametrize("status", ["302 Found", "307 Temporary Redirect",
                                    "308 Permanent Redirect"])
def test_a_redirect_to_another_origin_is_not_followed(status):
    with Hostile(lambda conn, request, server: answer(conn, "200 OK", b"{}")) as other:
        def redirect(conn, request, server):
            answer(conn, status, b"", extra=f"Location: {other.url}{request.path}\r\n")
        with Hostile(redirect) as door, credentialed(door.url) as client:
            with pytest.raises(HttpRefusal) as refused:
                client.card()
            assert refused.value.status == int(status[:3])
            assert other.url in refused.value.message
            with pytest.raises(HttpRefusal):
                client.call("GetTask", {"id": "tsk_1"})
        assert other.requests == [] and leaked(other) == set()


def test_a_redirect_within_the_origin_is_followed():
    def door_handler(conn, request, server):
        if request.path == "/.well-known/agent-card.json":
            answer(conn, "302 Found", b"", extra="Location: /card-here\r\n")
        else:
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
    with Hostile(door_handler) as door, credentialed(door.url) as client:
        assert client.card()["name"] == "hostile"
        assert [r.path for r in door.requests] == ["/.well-known/agent-card.json", "/card-here"]
        assert door.requests[1].headers["x-api-key"] == "key-1"


@pytest.mark.parametrize("location", [b"http://[::1/", b"/\xff", b"http://127.0.0.1:99999/"],
                         ids=["unclosed-ipv6", "not-utf-8", "no-such-port"])
def test_a_redirect_to_an_unreadable_location_is_refused_in_one_line(cli_env, capsys,
                                                                      location):
    def redirect(conn, request, server):
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: " + location +
                     b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    with Hostile(redirect) as door, credentialed(door.url) as client:
        with pytest.raises(HttpRefusal) as refused:
            client.card()
        assert refused.value.error == "redirect" and len(door.requests) == 1
        assert run_all(door, [("get", "tsk_1")]) == [2]
        assert "refused the request: 302 redirect" in capsys.readouterr().err


def test_a_cards_endpoint_on_another_origin_gets_no_request():
    def other_handler(conn, request, server):
        rpc_answer(conn, request, {"id": "tsk_1", "status": {"state": "TASK_STATE_WORKING"}})

    with Hostile(other_handler) as other:
        def door_handler(conn, request, server):
            if request.method == "GET":
                answer(conn, "200 OK", json.dumps(card(other.url + "/")).encode())
            else:
                rpc_answer(conn, request, {"id": "tsk_1", "status": {"state": "X"}})
        with Hostile(door_handler) as door, credentialed(door.url) as client:
            assert client.get("tsk_1")["status"]["state"] == "X"
            assert client.endpoint == door.url + "/"
            assert [r.method for r in door.requests] == ["GET", "POST"]
        assert other.requests == [] and leaked(other) == set()


# A URL urlsplit reads as the door's origin and urllib3 (where requests connects) as
# another: a backslash ends urllib3's authority, not urlsplit's.
TASK = {"id": "tsk_1", "status": {"state": "TASK_STATE_WORKING"}}
DISGUISED = ["http://localhost:{other}\\@127.0.0.1:{door}/",
             "http://localhost:{other}\\x@127.0.0.1:{door}/a2a"]


@pytest.mark.parametrize("endpoint", DISGUISED)
def test_a_cards_endpoint_on_another_origin_in_disguise_gets_no_request(endpoint):
    with Hostile(lambda conn, request, server: rpc_answer(conn, request, {"id": "x"})) \
            as other:
        def door_handler(conn, request, server):
            if request.method == "GET":
                url = endpoint.format(other=other.port, door=server.port)
                answer(conn, "200 OK", json.dumps(card(url)).encode())
            else:
                rpc_answer(conn, request, TASK)
        with Hostile(door_handler) as door, credentialed(door.url) as client:
            assert client.get("tsk_1") == TASK
            assert client.endpoint == door.url + "/"
        assert other.requests == [] and leaked(other) == set()


def test_an_internationalized_host_is_its_own_origin_in_either_form():
    """requests connects to a Unicode host by its IDNA form: a card's endpoint on the
    agent's own internationalized host, in either form, is the agent's origin (a URL whose
    host requests prepared in IDNA had no origin: the card's endpoint was not followed)."""
    agent = "http://b\u00fccher.example:8080"
    for endpoint in (agent + "/a2a/v1", "http://xn--bcher-kva.example:8080/a2a/v1"):
        assert same_origin(endpoint, agent), endpoint
    for other in ("http://b\u00fccher.example:8081/", "http://xn--bcher-kvb.example:8080/",
                  "http://localhost:1\\@b\u00fccher.example:8080/"):
        assert not same_origin(other, agent), other


def test_a_name_that_begins_like_a_loopback_address_is_another_host():
    # NOTE: before, any host beginning "127." was the loopback origin: a redirect or a
    # card's endpoint on 127.0.0.1.attacker.example was sent the credential.
    agent = "http://127.0.0.1:41880/a2a/v1/agents/echo"
    for other in ("http://127.0.0.1.attacker.example:41880/x", "http://127.evil:41880/x",
                  "http://127.0.0.1.nip.io:41880/", "http://[::1].evil:41880/"):
        assert not same_origin(other, agent), other
    for same in ("http://localhost:41880/x", "http://127.0.0.2:41880/y",
                 "http://[::1]:41880/", "http://LOCALHOST:41880/"):
        assert same_origin(same, agent), same


# --- streams --------------------------------------------------------------------------

MIB = 1024 * 1024
EVENT = b'data: {"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "tsk_1"}}}\n\n'


def stream_door(write_body, chunked: bool = True):
    """A server whose card names itself and whose every POST is a stream ``write_body`` writes."""
    return Hostile(stream_handler(write_body, chunked))


def stream_handler(write_body, chunked: bool = True):
    """``stream_door``'s handler."""
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        framing = "Transfer-Encoding: chunked\r\n" if chunked else "Connection: close\r\n"
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{framing}\r\n"
                     .encode())
        write_body(conn, server)
    return handler


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def test_a_close_delimited_stream_hands_each_event_over_as_it_arrives():
    def body(conn, server):
        conn.sendall(EVENT)
        server.stopping.wait(WAIT * 2)          # the connection stays open, quiet
    with stream_door(body, chunked=False) as door, \
            A2AClient(door.url, timeout=WAIT, stream_timeout=WAIT * 2) as client:
        stream = client.subscribe("tsk_1")
        finished, event = run_in_thread(lambda: next(stream), WAIT)
        stream.close()
        assert finished and event.kind == "task" and event.task_id == "tsk_1"


def endless(piece: bytes, framing=chunk, head: bytes = b""):
    """A body of ``head`` then ``piece`` again and again, past the limit, then silence."""
    def body(conn, server):
        conn.sendall(framing(head) if head else b"")
        sent = 0
        while sent < DEFAULT_MAX_ANSWER_BYTES + 4 * MIB and not server.stopping.is_set():
            conn.sendall(framing(piece))
            sent += len(piece)
        server.stopping.wait(WAIT * 2)
    return body


def one_huge_chunk(data: bytes) -> bytes:
    return data                                  # inside the one chunk the head announced


@pytest.mark.parametrize("body", [
    endless(b"x" * MIB, head=b"data: "),
    endless(b"data: " + b"x" * MIB + b"\n"),
    endless(b"x" * MIB, framing=one_huge_chunk, head=b"40000000\r\ndata: "),
], ids=["a-line-that-never-ends", "data-lines-that-never-end", "one-gigabyte-chunk"])
def test_an_event_past_the_limit_is_a_protocol_error(body):
    with stream_door(body) as door, \
            A2AClient(door.url, timeout=WAIT, stream_timeout=WAIT * 2) as client:
        stream = client.subscribe("tsk_1")
        finished, raised = run_in_thread(lambda: next(stream), WAIT)
        stream.close()
        assert finished and isinstance(raised, ProtocolError)
        assert "longer than" in str(raised)


def test_the_sse_limit_counts_one_event_and_never_comments():
    parser = SseParser(max_bytes=20)
    assert list(parser.feed(b": " + b"c" * 15 + b"\n")) == [SseEvent(event="comment",
                                                                     comment="c" * 15)]
    for _ in range(5):                          # ignored fields end with their blank line
        assert list(parser.feed(b"other: " + b"o" * 10 + b"\n\n")) == []
    assert list(parser.feed(b"data: 123456789\n\n")) == [SseEvent("123456789")]
    with pytest.raises(EventTooLarge):
        list(parser.feed(b"data: 123456789\ndata: 123456789\n"))


@pytest.mark.parametrize("retry", ["\u00b2".encode(), b"\xd9\xa3", b"9" * 5000, b"-1"],
                         ids=["superscript-two", "arabic-three", "5000-digits", "negative"])
def test_a_retry_that_is_not_a_few_ascii_digits_is_ignored(retry):
    parser = SseParser(max_bytes=20000)
    assert list(parser.feed(b"retry: " + retry + b"\ndata: x\n\nretry: 250\ndata: y\n\n")) == [
        SseEvent("x"), SseEvent("y", retry=250)]


# --- answers --------------------------------------------------------------------------


def endless_answer(content_length: str = ""):
    """A JSON answer that never ends: ``[`` then spaces, past the limit, then silence."""
    def handler(conn, request, server):
        head = f"Content-Length: {content_length}\r\n" if content_length else ""
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{head}"
                     "Connection: close\r\n\r\n[".encode())
        endless(b" " * MIB, framing=bytes)(conn, server)
    return handler


@pytest.mark.parametrize("length", ["", "4000000000"], ids=["until-close", "announced"])
@pytest.mark.parametrize("call", ["card", "get"])
def test_an_answer_past_the_limit_is_a_protocol_error(call, length):
    with Hostile(endless_answer(length)) as door, \
            A2AClient(door.url, timeout=WAIT * 2) as client:
        finished, raised = run_in_thread(
            lambda: client.card() if call == "card" else client.call("GetTask", {"id": "t"}),
            WAIT)
        assert finished and isinstance(raised, ProtocolError)
        assert "more than 67108864 bytes (max_answer_bytes)" in str(raised)


# Connection: close, as the server closes each connection once answered: without it the
# client may send its next request on the pooled connection as the server closes it (reset).
JSON_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
             b"Connection: close\r\n\r\n")


def trickle(conn, request, server):
    conn.sendall(JSON_HEAD % 1000000 + b"[")
    while not server.stopping.wait(0.05):       # one byte every 50 ms, each in time
        conn.sendall(b" ")


def silent(conn, request, server):
    conn.sendall(JSON_HEAD % 10)
    server.stopping.wait(WAIT * 2)


@pytest.mark.parametrize("handler, said", [(trickle, "did not finish its answer within"),
                                           (silent, "did not answer within")])
def test_an_answer_late_past_its_timeout_is_a_read_timeout(handler, said):
    with Hostile(handler) as door, A2AClient(door.url, timeout=0.5) as client:
        finished, raised = run_in_thread(lambda: client.call("GetTask", {"id": "t"}), WAIT)
        assert finished and isinstance(raised, ReadTimeout)
        assert said in str(raised)


def test_the_answers_deadline_counts_from_its_headers():
    def slow_then_steady(conn, request, server):
        server.stopping.wait(0.3)               # thinking: no byte yet, within the timeout
        head, tail = b'{"jsonrpc": "2.0", "id": 1, "result": ', b'{"id": "t"}}'
        conn.sendall(JSON_HEAD % len(head + tail) + head)
        server.stopping.wait(0.3)               # the rest, in time since the headers
        conn.sendall(tail)
    with Hostile(slow_then_steady) as door, A2AClient(door.url, timeout=0.5) as client:
        assert client.call("GetTask", {"id": "t"}) == {"id": "t"}
def test_a_redirects_own_body_is_never_read():
    def door_handler(conn, request, server):
        if request.path != "/.well-known/agent-card.json":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /card-here\r\n"
                     b"Content-Length: 4000000000\r\n\r\n")
        endless(b" " * MIB, framing=bytes)(conn, server)
    with Hostile(door_handler) as door, A2AClient(door.url, timeout=WAIT * 2) as client:
        finished, value = run_in_thread(client.card, WAIT)
        assert finished and value["name"] == "hostile"


# --- what the commands print ----------------------------------------------------------

EVIL = "evil\x1b]0;owned\x07\x1b[2J\r\x9b31m\u202e\ud800"
UNSAFE = ["\x1b", "\x07", "\r", "\x9b", "\u202e", "\ud800"]
EVIL_TASK = {"id": EVIL, "contextId": EVIL, "status": {
    "state": "TASK_STATE_FAILED", "timestamp": EVIL,
    "message": {"role": "ROLE_AGENT", "parts": [{"text": EVIL}]}},
    "artifacts": [{"artifactId": EVIL, "parts": [{"text": EVIL}, {"data": {EVIL: EVIL}}]}]}


@pytest.fixture
def cli_env(monkeypatch, tmp_path):
    """No agent found by accident: an empty home, no MURMUR_* variables."""
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path / "home"))
    for name in ("MURMUR_DOOR_URL", "MURMUR_DOOR_TOKEN", "MURMUR_API_KEY", "MURMUR_TENANT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def evil_cli(capsys, cli_env):
    """``evil_cli(*argv)`` -> (status, stdout, stderr) against a server whose texts are EVIL."""
    def handler(conn, request, server):
        if request.method == "GET":
            value = card(server.url + "/", name=EVIL, version=EVIL, skills=[
                {"id": EVIL, "name": EVIL}])
            answer(conn, "200 OK", json.dumps(value).encode())
        elif json.loads(request.body)["method"] == "CancelTask":
            rpc_answer(conn, request, error={"code": -32002, "message": EVIL})
        else:
            rpc_answer(conn, request, {"tasks": [EVIL_TASK], **EVIL_TASK})

    with Hostile(handler) as door:
        def run(*argv):
            status = main([*argv, "--url", door.url, "--timeout", str(WAIT)])
            captured = capsys.readouterr()
            return status, captured.out, captured.err
        yield run


@pytest.mark.parametrize("argv", [("card",), ("card", "--json"), ("get", "tsk_1"),
                                  ("get", "tsk_1", "--json"), ("tasks",), ("cancel", "tsk_1")])
def test_the_commands_print_no_control_character_the_server_wrote(evil_cli, argv):
    status, out, err = evil_cli(*argv)
    printed = out + err
    assert status in (0, 1) and [c for c in UNSAFE if c in printed] == []
    if "--json" in argv:
        assert json.loads(out)["name" if "card" in argv else "id"] == EVIL   # escaped as JSON
    else:
        assert "evil\\x1b]0;owned\\x07\\x1b[2J\\x0d\\x9b31m\\u202e\\ud800" in printed


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
@pytest.mark.parametrize("argv", [("get", "tsk_1"), ("card", "--json"), ("cancel", "tsk_1")])
def test_text_the_terminal_cannot_encode_is_written_escaped(cli_env, monkeypatch, argv,
                                                             encoding):
    """A terminal (or a pipe) whose encoding is not UTF-8 gets what it cannot encode as
    backslash escapes, not a UnicodeEncodeError's traceback."""
    said = "caf\u00e9 \u2192 \U0001f389"
    task = {"id": "tsk_1", "status": {"state": "TASK_STATE_COMPLETED", "message": {
        "role": "ROLE_AGENT", "parts": [{"text": said}]}}}

    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/", name=said)).encode())
        elif json.loads(request.body)["method"] == "CancelTask":
            rpc_answer(conn, request, error={"code": -32002, "message": said})
        else:
            rpc_answer(conn, request, task)
    streams = {name: io.TextIOWrapper(io.BytesIO(), encoding=encoding)
               for name in ("stdout", "stderr")}
    for name, stream in streams.items():
        monkeypatch.setattr(sys, name, stream)
    with Hostile(handler) as door:
        status = main([*argv, "--url", door.url, "--timeout", str(WAIT)])
    written = "".join(s.buffer.getvalue().decode(encoding) for s in streams.values())
    assert status in (0, 1) and "\\u2192" in written and "\\U0001f389" in written


def test_the_spinner_on_a_terminal_that_cannot_encode_its_text_writes_escapes():
    terminal = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    spinner = Spinner(terminal, enabled=True)
    spinner.update("sending\u2026 \u2192 caf\u00e9\x1b[2J")
    spinner.clear()
    drawn = terminal.buffer.getvalue().decode("ascii")
    assert "sending\\u2026 \\u2192 caf\\xe9\\x1b[2J" in drawn and drawn.endswith("\r\x1b[K")


# --- answers of the wrong shape -------------------------------------------------------

DEEP = "[" * 100000 + "]" * 100000
CARDS = [[], "x", {"capabilities": []}, {"capabilities": {"extensions": "x"}},
         {"capabilities": {"extensions": [{"uri": DOOR_URI, "params": []}]}},
         {"capabilities": {"extensions": [{"uri": STREAM_URI, "params": {"frames": 3}}]}},
         {"supportedInterfaces": ["x", {"url": 5}]}, {"skills": ["x", 5]},
         {"securitySchemes": []}, {"securitySchemes": {"a": {"apiKeySecurityScheme": "x"}}},
         {"name": ["n"], "version": {"v": 1}}]
TASKS = [[], "x", 5, {"id": 5, "status": "x"}, {"status": {"state": ["s"], "message": "x"}},
         {"status": {"message": {"parts": "x"}}}, {"status": {"message": {"parts": ["x", 5]}}},
         {"artifacts": "x"}, {"artifacts": ["x", {"parts": "p"}, {"artifactId": []}]},
         {"artifacts": [{"artifactId": "residue", "parts": ["x", {"data": "d"}]}]},
         {"metadata": []}, {"metadata": {"murmur": {"runningCommands": ["x"]}}},
         {"tasks": "x"}, {"tasks": ["x", {"status": []}]}, {"tasks": [], "nextPageToken": []},
         {"canceled": "x", "residue": ["x", 5]}, {"status": {"state": "TASK_STATE_FAILED",
                                                             "timestamp": ["t"]}}]
ERRORS = [{"code": "x", "message": ["m"], "data": "x"}, {"data": [
    {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "metadata": [], "reason": []}]},
    [], "x"]
COMMANDS = [("card",), ("get", "t"), ("tasks",), ("cancel", "t"), ("send", "hi"),
            ("send", "--no-wait", "hi"), ("stop",), ("push", "list", "t")]


def shaped_door(card_value, result=None, error=None, raw: str | None = None):
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card_value).encode() if raw is None
                   else raw.encode())
        elif raw is not None:
            answer(conn, "200 OK", raw.encode())
        elif error is not None:
            answer(conn, "200 OK", json.dumps({"jsonrpc": "2.0", "id": 1,
                                               "error": error}).encode())
        else:
            rpc_answer(conn, request, result)
    return Hostile(handler)


def run_all(door, commands=COMMANDS) -> list[int]:
    """Each command's exit status against ``door`` (a traceback fails the test)."""
    return [main([*argv, "--url", door.url, "--timeout", str(WAIT)]) for argv in commands]


@pytest.mark.parametrize("value", CARDS, ids=lambda v: json.dumps(v)[:40])
def test_a_card_of_the_wrong_shape_is_no_traceback(cli_env, value, capsys):
    with shaped_door(value, {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}}) as door:
        assert set(run_all(door)) <= {0, 1, 2}


@pytest.mark.parametrize("value", TASKS, ids=lambda v: json.dumps(v)[:40])
def test_a_result_of_the_wrong_shape_is_no_traceback(cli_env, value, capsys):
    with shaped_door(card("http://x/"), value) as door:
        assert set(run_all(door)) <= {0, 1, 2, 3}


@pytest.mark.parametrize("value", ERRORS, ids=lambda v: json.dumps(v)[:40])
def test_an_error_of_the_wrong_shape_is_no_traceback(cli_env, value, capsys):
    with shaped_door(card("http://x/"), error=value) as door:
        assert set(run_all(door, COMMANDS[1:])) <= {1, 2}


def test_json_nested_past_the_recursion_limit_is_a_protocol_error():
    with shaped_door(None, raw=DEEP) as door, A2AClient(door.url, timeout=WAIT) as client:
        with pytest.raises(ProtocolError):
            client.card()
        with pytest.raises(ProtocolError):
            client.call("GetTask", {"id": "t"})


def test_a_stream_event_of_the_wrong_shape_reads_as_none():
    task_event = StreamEvent.from_result({"task": {"id": 5, "contextId": [], "status": "x"}})
    assert (task_event.task_id, task_event.context_id, task_event.state) == (None, None, None)
    assert task_event.text == "" and not task_event.terminal
    update = StreamEvent.from_result({"statusUpdate": {"taskId": "t", "status": {"state": [1]}}})
    assert update.state is None and update.task_id == "t"
    artifact = StreamEvent.from_result({"artifactUpdate": {"artifact": "x"}})
    message = StreamEvent.from_result({"message": {"metadata": [], "parts": "x"}})
    assert (artifact.text, message.text, message.frame) == ("", "", None)


# --- pages ----------------------------------------------------------------------------


def looping_pages(conn, request, server):
    """Every page names a next page; the tokens come back: p0, p1, p2, p0, p1, ..."""
    if request.method == "GET":
        answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
        return
    token = f"p{len(server.requests) % 3}"
    rpc_answer(conn, request, {"tasks": [EVIL_TASK], "configs": [{"id": "c"}],
                               "nextPageToken": token})


@pytest.mark.parametrize("argv", [("tasks",), ("push", "list", "t")])
def test_pages_that_loop_end_with_one_line(cli_env, capsys, argv):
    with Hostile(looping_pages) as door:
        finished, status = run_in_thread(lambda: run_all(door, [argv]), WAIT)
        assert finished and status == [2]
        assert "nextPageToken 'p" in capsys.readouterr().err and len(door.requests) < 10


# --- headers that trickle -------------------------------------------------------------

HEADERS_TIMEOUT = 0.25         # a dozen bytes, each 20 ms after the last: none is late
LATE = 0.6                      # how late past its timeout a call may end, under load


def trickled_headers(conn, server):
    """A status line and one header, a byte every 20 ms (each in time), never ending."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 60000
    for byte in head:
        if server.stopping.wait(0.02):
            return
        conn.sendall(bytes([byte]))


def trickling_door(what: str):
    """A server whose ``what`` (the card, a call, a stream) answers with trickled headers."""
    def handler(conn, request, server):
        if what != "card" and request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
        else:
            trickled_headers(conn, server)
    return Hostile(handler)


CALLS = {"card": lambda client: client.card(),
         "call": lambda client: client.call("GetTask", {"id": "t"}),
         "stream": lambda client: next(client.subscribe("tsk_1"))}


@pytest.mark.timed
@pytest.mark.waits
@pytest.mark.parametrize("what", list(CALLS))
def test_headers_that_trickle_end_at_the_calls_timeout(what):
    with trickling_door(what) as door, \
            A2AClient(door.url, timeout=HEADERS_TIMEOUT, stream_timeout=HEADERS_TIMEOUT) \
            as client:
        if what != "card":
            client.endpoint                     # the card, answered at once
        started = time.monotonic()
        finished, raised = run_in_thread(lambda: CALLS[what](client), WAIT)
        elapsed = time.monotonic() - started
        assert finished and isinstance(raised, ReadTimeout), raised
        assert "did not answer within the timeout" in str(raised)
        assert HEADERS_TIMEOUT <= elapsed < HEADERS_TIMEOUT + LATE, elapsed


def test_a_calls_deadline_never_cuts_its_connection_back_in_the_pool():
    """Two calls on one kept-alive connection: the first's deadline passes during the
    second, which takes longer than the first's timeout and still gets its answer."""
    posts_by_connection = []

    def keep_alive(conn, request, server):
        posts_by_connection.append(0)
        while request is not None:
            if request.method == "GET":
                body = json.dumps(card(server.url + "/")).encode()
            else:
                posts_by_connection[-1] += 1
                sent = json.loads(request.body)
                if sent["params"]["id"] == "slow":
                    server.stopping.wait(FIRST_TIMEOUT * 2)     # past the first's deadline
                body = json.dumps({"jsonrpc": "2.0", "id": sent["id"],
                                   "result": {"id": sent["params"]["id"]}}).encode()
            conn.sendall(KEPT_HEAD % len(body) + body)
            request = read_request(conn)

    with Hostile(keep_alive) as door, A2AClient(door.url, timeout=FIRST_TIMEOUT) as client:
        assert client.call("GetTask", {"id": "quick"}) == {"id": "quick"}
        assert client.call("GetTask", {"id": "slow"}, timeout=WAIT) == {"id": "slow"}
    assert posts_by_connection == [2]


FIRST_TIMEOUT = 0.3
KEPT_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"



def endless_pages(conn, request, server):
    """Every page names a next page never named before: p1, p2, p3, ... one task each."""
    if request.method == "GET":
        answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
        return
    n = len(server.requests)
    rpc_answer(conn, request, {"tasks": [{"id": f"tsk_{n}", "status": {
        "state": "TASK_STATE_COMPLETED"}}], "configs": [{"id": f"c{n}"}],
        "nextPageToken": f"p{n}"})


def endless_pages_kept_alive(conn, request, server):
    """``endless_pages``, every answer on the one connection the client keeps.

    PERF: a thousand pages on a connection each (each a connect, and a thread of the
    server's) cost a fifth of these tests' CPU; what they check is where the pages stop."""
    while request is not None:
        if request.method == "GET":
            body = json.dumps(card(server.url + "/")).encode()
        else:
            n = len(server.requests)
            body = json.dumps({"jsonrpc": "2.0", "id": json.loads(request.body).get("id"),
                               "result": {"tasks": [{"id": f"tsk_{n}", "status": {
                                   "state": "TASK_STATE_COMPLETED"}}],
                                   "configs": [{"id": f"c{n}"}], "nextPageToken": f"p{n}"}})
            body = body.encode()
        conn.sendall(KEPT_HEAD % len(body) + body)
        request = read_request(conn)
        if request is not None:
            server.requests.append(request)


def posts(server: Hostile) -> int:
    return sum(r.method == "POST" for r in server.requests)


PAGES_WAIT = 60.0               # a thousand pages, under load


def test_tasks_stops_after_a_thousand_pages_that_never_end(cli_env, capsys):
    with Hostile(endless_pages_kept_alive) as door:
        finished, status = run_in_thread(lambda: run_all(door, [("tasks", "--json")]),
                                         PAGES_WAIT)
        assert finished and status == [2]
        out, err = capsys.readouterr()
        assert len(out.splitlines()) == 1000 == posts(door)
        assert "the listing stops after 1000 pages (1000 tasks)" in err
        assert "still names a next page" in err and "--max-pages" in err


def test_tasks_max_pages_prints_what_it_read_then_says_it_stopped(cli_env, capsys):
    with Hostile(endless_pages) as door:
        finished, status = run_in_thread(
            lambda: run_all(door, [("tasks", "--max-pages", "3")]), WAIT)
        assert finished and status == [2]
        out, err = capsys.readouterr()
        assert [line.split()[0] for line in out.splitlines()] == [
            "TASK", "tsk_2", "tsk_3", "tsk_4"] and posts(door) == 3
        assert err.count("\n") == 1 and "stops after 3 pages (3 tasks)" in err
        assert run_all(door, [("tasks", "--max-pages", "3", "--limit", "2")]) == [0]
        assert posts(door) == 5                 # the limit, in the second page read
        assert "stops" not in capsys.readouterr().err
        with pytest.raises(SystemExit) as refused:
            run_all(door, [("tasks", "--max-pages", "0")])
        assert refused.value.code == 2 and "from 1" in capsys.readouterr().err


def test_push_list_stops_after_a_thousand_pages_that_never_end(cli_env, capsys):
    with Hostile(endless_pages_kept_alive) as door:
        finished, status = run_in_thread(lambda: run_all(door, [("push", "list", "t")]),
                                         PAGES_WAIT)
        assert finished and status == [2] and posts(door) == 1000
        out, err = capsys.readouterr()
        assert "more than 1000 pages" in err
        assert len(out.splitlines()) == 1000        # each page's config, as it came


@pytest.mark.parametrize("as_json", [False, True])
def test_push_list_prints_each_page_before_it_reads_the_next(cli_env, capsys, as_json):
    """MEMORY: a page at a time. Before, every config of every page was kept until the
    last page (a server naming pages of 2,000,000 configs grew the command by about
    310 MB a page), then printed; ``--json`` one list."""
    printed = []                # what the command had printed when each page was asked

    def three_pages(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        printed.append(capsys.readouterr().out)
        n = len(printed)
        rpc_answer(conn, request, {"configs": [{"id": f"c{n}", "url": "https://hook.test/"}],
                                   "nextPageToken": f"p{n}" if n < 3 else ""})
    with Hostile(three_pages) as door:
        argv = ("push", "list", "t", *(("--json",) if as_json else ()))
        assert run_all(door, [argv]) == [0]
    printed.append(capsys.readouterr().out)
    lines = [text.splitlines() for text in printed]
    if as_json:
        assert [[json.loads(line).get("id") for line in page] for page in lines[1:]] == \
            [["c1"], ["c2"], ["c3"]]
    else:
        assert [page[0].split()[0] for page in lines[1:]] == ["c1", "c2", "c3"]
    assert printed[0] == ""


def test_list_pages_stops_after_max_pages_and_list_reads_only_what_is_used():
    with Hostile(endless_pages) as door, A2AClient(door.url, timeout=WAIT) as client:
        pages = list(client.list_pages(max_pages=2))
        assert [p["nextPageToken"] for p in pages] == ["p2", "p3"]
        assert [t["id"] for t in itertools.islice(client.list(), 3)] == [
            "tsk_4", "tsk_5", "tsk_6"] and posts(door) == 5


TOKEN_TAIL = b"x" * (2 * MIB)


def test_the_pages_tokens_are_not_kept_whole():
    """Each page names a fresh token of 2 MiB: what is kept of the tokens seen stays small
    (the server allocates nothing that large while the client's memory is measured)."""
    def huge_tokens(conn, request, server):
        echoed = request_id(request)
        request.body = b""                      # the token the client sent: not kept
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        head = b'{"jsonrpc": "2.0", "id": %s, "result": {"tasks": [], "nextPageToken": "%d' \
            % (echoed, len(server.requests))
        conn.sendall(JSON_HEAD % (len(head) + len(TOKEN_TAIL) + 3) + head)
        conn.sendall(TOKEN_TAIL)
        conn.sendall(b'"}}')

    with Hostile(huge_tokens) as door, A2AClient(door.url, timeout=WAIT) as client:
        tracemalloc.start()
        try:
            pages = client.list_pages(max_pages=20)
            next(pages)
            baseline, held = tracemalloc.get_traced_memory()[0], 0
            for _ in pages:                     # between two pages, what the listing holds
                held = max(held, tracemalloc.get_traced_memory()[0] - baseline)
        finally:
            tracemalloc.stop()
    assert held < 8 * MIB, held                 # 19 more tokens kept whole: 38 MiB


def traced_peak(call):
    """``call()``'s result, and the peak of the memory traced while it ran."""
    tracemalloc.start()
    try:
        return call(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


ID_TAIL = b"i" * (2 * MIB)


def huge_ids(conn, request, server):
    """Pages of one task each, whose id and contextId are 2 MiB: p1, p2, ... forever."""
    echoed = request_id(request)
    request.body = b""                          # what the client sent: not kept
    if request.method == "GET":
        answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
        return
    n = b"%d" % len(server.requests)
    parts = [b'{"jsonrpc": "2.0", "id": ' + echoed + b', "result": {"nextPageToken": "p' + n +
             b'", "tasks": [{"id": "tsk_' + n, ID_TAIL, b'", "contextId": "ctx_' + n, ID_TAIL,
             b'", "status": {"state": "TASK_STATE_WORKING"}}]}}']
    conn.sendall(JSON_HEAD % sum(map(len, parts)))
    for part in parts:
        conn.sendall(part)


def test_tasks_keeps_no_whole_cell_of_the_pages_it_read(cli_env, capsys):
    """Twenty pages of a task whose id and context are 2 MiB each: the table keeps a short
    cell of each (80 MiB when kept whole)."""
    with Hostile(huge_ids) as door:
        status, held = traced_peak(lambda: run_all(door, [("tasks", "--max-pages", "20")]))
        out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert status == [2] and len(lines) == 21 and held < 24 * MIB, held
    assert lines[1].startswith("tsk_2iii") and "…" in lines[1] and len(lines[1]) < 400


def test_tasks_prints_its_table_once_a_block_of_rows_is_read(cli_env, monkeypatch):
    """With a block of 5 rows, a listing of pages of one task each is printed from the
    fifth on, one line a page, the columns sized by the first five: what was printed when
    each page was asked for."""
    monkeypatch.setattr(render, "TABLE_BLOCK", 5)
    stdout, printed = io.StringIO(), []
    monkeypatch.setattr(sys, "stdout", stdout)

    def counted(conn, request, server):
        printed.append(stdout.getvalue().count("\n"))
        endless_pages(conn, request, server)
    with Hostile(counted) as door:
        assert run_all(door, [("tasks", "--max-pages", "8", "--limit", "8")]) == [0]
    lines = stdout.getvalue().splitlines()
    assert printed[1:] == [0, 0, 0, 0, 0, 6, 7, 8] and len(lines) == 9   # the card first
    assert [line.index("STATE") if i == 0 else line.index("completed") for i, line in
            enumerate(lines)] == [len("tsk_2") + 2] * 9


# --- what a stream's reader keeps -----------------------------------------------------

NAME_TAIL = b"n" * (2 * MIB)


def rpc_event(result: bytes) -> bytes:
    return b'data: {"jsonrpc": "2.0", "id": 1, "result": ' + result + b'}\n\n'


GAP_HEAD = (b'data: {"jsonrpc": "2.0", "id": 1, "result": {"message": {"role": "ROLE_AGENT", '
            b'"parts": [], "metadata": {"' + STREAM_URI.encode() +
            b'": {"frame": "gap", "firstAvailableId": ')
GAP_TAIL = b'}}}}}\n\n'


TERMINAL_EVENT = rpc_event(b'{"statusUpdate": {"taskId": "tsk_1", "status": '
                           b'{"state": "TASK_STATE_COMPLETED"}}}')


def task_stream(write_body):
    """A server whose streams ``write_body`` writes and whose GetTask answers tsk_1, done."""
    streams = stream_handler(write_body, chunked=False)

    def handler(conn, request, server):
        if b'"GetTask"' in request.body:
            rpc_answer(conn, request, {"id": "tsk_1", "status": {
                "state": "TASK_STATE_COMPLETED"}})
            return
        streams(conn, request, server)
    return handler


class Sink:
    """A stdout that counts what it is given and keeps none of it."""
    encoding = "utf-8"

    def __init__(self):
        self.lines = 0

    def write(self, text):
        self.lines += text.count("\n")

    def flush(self):
        pass


def test_subscribe_keeps_no_whole_artifact_name(cli_env, monkeypatch):
    """Twenty artifacts of a fresh 2 MiB name each: what the command keeps to tell a
    replaced artifact from a new one is not the names (40 MiB when kept whole)."""
    def body(conn, server):
        for i in range(20):
            conn.sendall(b'data: {"jsonrpc": "2.0", "id": 1, "result": {"artifactUpdate": '
                         b'{"taskId": "tsk_1", "artifact": {"artifactId": "a%d' % i)
            conn.sendall(NAME_TAIL)
            conn.sendall(b'", "parts": []}}}}\n\n')
        conn.sendall(TERMINAL_EVENT)

    handler = task_stream(body)
    sink = Sink()
    monkeypatch.setattr(sys, "stdout", sink)
    with Hostile(handler) as door:
        status, held = traced_peak(lambda: run_all(door, [("subscribe", "tsk_1")]))
    assert status == [0] and sink.lines == 21 and held < 24 * MIB, held


def test_a_streams_gaps_keep_the_latest_numbers_and_no_value_whole():
    """A stream of gap frames: 20 whose firstAvailableId is a 2 MiB text (kept as None,
    not 40 MiB), then MAX_GAPS more numbered ones, of which the latest are kept."""
    def body(conn, server):
        for i in range(20):
            conn.sendall(GAP_HEAD + b'"%d' % i)
            conn.sendall(NAME_TAIL)
            conn.sendall(b'"' + GAP_TAIL)
        for i in range(MAX_GAPS + 5):
            conn.sendall(GAP_HEAD + b"%d" % i + GAP_TAIL)
        conn.sendall(TERMINAL_EVENT)

    with stream_door(body, chunked=False) as door, A2AClient(door.url, timeout=WAIT) as client:
        stream = client.subscribe("tsk_1")
        frames, held = traced_peak(lambda: sum(event.frame == "gap" for event in stream))
    assert frames == MAX_GAPS + 25 and held < 24 * MIB, held
    assert len(stream.gaps) == MAX_GAPS and stream.gaps[-1] == (None, MAX_GAPS + 4)
    assert stream.gaps[0] == (None, 5) and stream.ended == "terminal"


def test_recent_names_are_the_latest_few_as_digests():
    recent = Recent(3)
    assert [recent.seen(name) for name in ("a", "b", "a", "c", "d", "b", "a")] == [
        False, False, True, False, False, False, False]       # "b" and "a" were forgotten
    assert len(recent) == 3 and recent.seen("d") and recent.seen("x" * MIB) is False


class SlowTerminal(io.StringIO):
    """A terminal that takes its time: a write showing ``slow_on`` waits for ``until``
    (the server done writing), as a terminal behind a slow link blocks its writer."""

    def __init__(self, slow_on: str, until):
        super().__init__()
        self.slow_on, self.until = slow_on, until

    def isatty(self):
        return True

    def write(self, text):
        if self.slow_on in text:
            self.until.wait(WAIT)
        return super().write(text[:200])


def test_the_spinner_keeps_only_the_latest_event_while_the_terminal_is_slow(cli_env,
                                                                             monkeypatch):
    """Twenty statuses of 2 MiB each while the spinner's terminal blocks on the first:
    the reader hands over the latest, it does not queue them all (40 MiB)."""
    written = threading.Event()

    def body(conn, server):
        for i in range(20):
            conn.sendall(b'data: {"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": '
                         b'{"taskId": "tsk_1", "status": {"state": "TASK_STATE_WORKING", '
                         b'"message": {"role": "ROLE_AGENT", "parts": [{"text": "status %d '
                         % i)
            conn.sendall(NAME_TAIL)
            conn.sendall(b'"}]}}}}}\n\n')
        conn.sendall(TERMINAL_EVENT)
        written.set()
    handler = task_stream(body)
    monkeypatch.setattr(sys, "stderr", SlowTerminal("status 0", written))
    monkeypatch.setattr(sys, "stdout", Sink())
    with Hostile(handler) as door:
        status, held = traced_peak(lambda: run_all(door, [("send", "hi")]))
    assert status == [0] and written.is_set() and held < 24 * MIB, held
