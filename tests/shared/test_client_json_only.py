"""The client reads JSON only: NaN, Infinity and a number no double holds are not read.

RFC 8259 has no NaN or Infinity; Python's json reads them, and reads 1e400 as infinity.
What the client read so, ``--json`` ("JSON for scripts") wrote back as ``NaN`` and
``Infinity``, which no JSON parser of a script reads.
"""
from __future__ import annotations

import json

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
