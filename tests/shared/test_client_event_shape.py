"""A stream event of no A2A member: one short error, whatever the event holds."""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.cli import main
from murmur_wsgi.client import A2AClient, ProtocolError
from murmur_wsgi.client.events import StreamEvent
from tests.shared.hostile_server import Hostile, answer, card

MIB = 1024 * 1024
WAIT = 4.0


def unknown_member_stream(conn, request, server):
    """A server whose card names itself and whose every stream writes one event of 8 MiB
    whose result has none of task, message, statusUpdate and artifactUpdate."""
    if request.method == "GET":
        answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
        return
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                 b"Connection: close\r\n\r\n")
    conn.sendall(b'data: {"jsonrpc": "2.0", "id": 1, "result": {"kind": "task", "task2": "'
                 + b"x" * (8 * MIB) + b'"}}\n\n')


def test_a_result_of_no_known_member_is_named_by_its_keys_not_its_value():
    """NOTE: before, the error quoted the whole result's repr: 21 MB of text (3 s) for a
    result of a million small objects, printed by the command line as its one line."""
    with pytest.raises(ValueError) as info:
        StreamEvent.from_result({"foo": [{"a": "b" * 10} for _ in range(100_000)],
                                 "k" * 10_000: 1})
    said = str(info.value)
    assert said.startswith("a StreamResponse with none of task, message, statusUpdate, "
                           "artifactUpdate: its keys are 'foo', 'kkk"), said
    assert len(said) < 400, len(said)


def test_a_stream_event_of_no_known_member_is_one_short_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path / "home"))
    with Hostile(unknown_member_stream) as door:
        with A2AClient(door.url, timeout=WAIT) as client, \
                pytest.raises(ProtocolError) as info:
            list(client.subscribe("tsk_1"))
        assert len(str(info.value)) < 400
        assert main(["subscribe", "tsk_1", "--url", door.url, "--timeout", str(WAIT)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 500, len(err)
    assert "its keys are 'kind', 'task2'" in err
    # … and names the agent's address, as every error line does
    assert f"the agent at {door.url} wrote a StreamResponse with none of" in err, err
