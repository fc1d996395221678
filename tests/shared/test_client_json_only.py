"""The client reads JSON only: NaN, Infinity and a number no double holds are not read.

RFC 8259 has no NaN or Infinity; Python's json reads them, and reads 1e400 as infinity.
What the client read so, ``--json`` ("JSON for scripts") wrote back as ``NaN`` and
``Infinity``, which no JSON parser of a script reads.
"""
from __future__ import annotations

import json
import re

import pytest

from murmur_wsgi.cli import main
from murmur_wsgi.client import A2AClient, ProtocolError
from murmur_wsgi.client import body
from tests.shared.hostile_server import Hostile, answer, card

WAIT = 4.0
NOT_JSON = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"]


@pytest.mark.parametrize("literal", NOT_JSON)
def test_loads_refuses_what_json_text_cannot_hold(literal):
    with pytest.raises(ValueError):
        body.loads('{"x": %s}' % literal)


@pytest.mark.parametrize("text, value", [("1e308", 1e308), ("1e-400", 0.0), ("-0.0", -0.0),
                                         ("1" + "0" * 400, 10 ** 400), ('"NaN"', "NaN")])
def test_loads_reads_every_number_a_double_holds_and_integers_whole(text, value):
    assert body.loads('{"x": %s}' % text) == {"x": value}


def door_answering(literal: str):
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
        else:
            answer(conn, "200 OK", ('{"jsonrpc": "2.0", "id": 1, "result": {"id": "t", '
                                    '"status": {"state": "TASK_STATE_COMPLETED"}, '
                                    '"metadata": {"x": %s}}}' % literal).encode())
    return Hostile(handler)


@pytest.mark.parametrize("literal", NOT_JSON)
def test_an_answer_holding_one_is_a_protocol_error_and_json_out_stays_json(
        literal, capsys, monkeypatch, tmp_path):
    """NOTE: before, ``murmur-wsgi get --json`` printed ``{"x": NaN}`` (or Infinity) and
    exited 0."""
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path / "home"))
    with door_answering(literal) as door:
        with A2AClient(door.url, timeout=WAIT) as client, pytest.raises(ProtocolError):
            client.get("t")
        assert main(["get", "t", "--json", "--url", door.url, "--timeout", str(WAIT)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "answered something that is not JSON" in captured.err


# --- the content type of an answer ------------------------------------------------------

TASK_ANSWER = (b'{"jsonrpc": "2.0", "id": 1, "result": {"id": "t", '
               b'"status": {"state": "TASK_STATE_COMPLETED"}}}')
PAGE = b"<html><body>502 Bad Gateway</body></html>"


def door_typed(status: str, content_type: str | None, data: bytes):
    """A server with a card whose every call is answered ``status``, ``content_type`` (None:
    no Content-Type header) and ``data``."""
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
        elif content_type is None:
            conn.sendall(b"HTTP/1.1 %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                         % (status.encode(), len(data), data))
        else:
            answer(conn, status, data, content_type)
    return Hostile(handler)


@pytest.mark.parametrize("content_type", ["application/json", "Application/JSON; charset=utf-8",
                                          "application/json ;charset=UTF-8"])
def test_an_answer_of_application_json_with_any_parameters_or_case_is_read(content_type):
    with door_typed("200 OK", content_type, TASK_ANSWER) as door, \
            A2AClient(door.url, timeout=WAIT) as client:
        assert client.get("t")["status"]["state"] == "TASK_STATE_COMPLETED"


TYPED = [("200 OK", "text/html", PAGE, "HTTP 200 with Content-Type 'text/html'"),
         ("502 Bad Gateway", "text/html; charset=utf-8", PAGE,
          "HTTP 502 with Content-Type 'text/html; charset=utf-8'"),
         ("200 OK", "text/plain", TASK_ANSWER, "HTTP 200 with Content-Type 'text/plain'"),
         ("200 OK", "application/json-rpc", TASK_ANSWER,
          "HTTP 200 with Content-Type 'application/json-rpc'"),
         ("401 Unauthorized", "text/html", PAGE, "HTTP 401 with Content-Type 'text/html'"),
         ("200 OK", None, TASK_ANSWER, "HTTP 200 with no Content-Type")]


@pytest.mark.parametrize("status, content_type, data, said", TYPED,
                         ids=[f"{t[0][:3]}-{t[1]}" for t in TYPED])
def test_an_answer_of_another_content_type_is_a_protocol_error_naming_it(
        status, content_type, data, said, capsys, monkeypatch, tmp_path):
    """A JSON-RPC answer is application/json (A2A, section 3.2). Before, a proxy's HTML page
    was "not JSON" without its status (200), or an ``http_error`` quoting the page's first
    200 characters (502), and a valid body of text/plain was read as the answer."""
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path / "home"))
    with door_typed(status, content_type, data) as door:
        with A2AClient(door.url, timeout=WAIT) as client:
            with pytest.raises(ProtocolError, match=f"{re.escape(said)}, not application/json"):
                client.get("t")
            with pytest.raises(ProtocolError, match=re.escape(said)):
                list(client.subscribe("t"))
        assert main(["get", "t", "--url", door.url, "--timeout", str(WAIT)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"murmur-wsgi: the agent at {door.url} answered {said}, not "
                            "application/json: not a JSON-RPC answer\n")
