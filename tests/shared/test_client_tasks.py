"""The commands against servers whose task (or other answer) cannot be read: a state that
is not a string, an artifact or an extended card that is not an object. Each is refused in one line, exit 2,
with nothing printed of it first.

Each server is a ``Hostile`` (tests/shared/hostile_server.py) on a free loopback port.
"""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.cli import main
from murmur_wsgi.client import A2AClient, ProtocolError
from murmur_wsgi.uris import DOOR_URI
from tests.shared.hostile_server import Hostile, answer, card, rpc_answer

WAIT = 4.0
DOOR_CARD = {"capabilities": {"extensions": [{"uri": DOOR_URI, "params": []}]}}


@pytest.fixture
def cli_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path / "home"))
    for name in ("MURMUR_DOOR_URL", "MURMUR_DOOR_TOKEN", "MURMUR_API_KEY", "MURMUR_TENANT"):
        monkeypatch.delenv(name, raising=False)


def answering(result, **card_fields):
    """A server with a card (``card_fields`` added) whose every call is answered ``result``."""
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/", **card_fields)).encode())
        else:
            rpc_answer(conn, request, result)
    return Hostile(handler)


def refused(argv, result, capsys, **card_fields) -> str:
    """The one error line of ``murmur-wsgi ARGV`` against a server answering ``result``,
    which exits 2 and prints nothing on stdout."""
    with answering(result, **card_fields) as door:
        assert main([*argv, "--url", door.url, "--timeout", str(WAIT)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    assert captured.err.count("\n") == 1, captured.err
    return captured.err


MALFORMED = {"state-a-number": ({"id": "tsk_1", "status": {"state": 5}}, "status.state"),
             "state-missing": ({"id": "tsk_1", "status": {}}, "status.state"),
             "status-a-text": ({"id": "tsk_1", "status": "done"}, "status is not an object"),
             "id-a-number": ({"id": 7, "status": {"state": "TASK_STATE_COMPLETED"}}, "id"),
             "no-status": ({"id": "tsk_1"}, "without a status")}


@pytest.mark.parametrize("command", ["get", "cancel"])
@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_task_whose_state_cannot_be_read_is_exit_2(cli_env, capsys, command, case):
    """A task whose state is not a string said "state unknown", exit 0 (``get``), and
    ``cancel`` printed its id first."""
    task, said = MALFORMED[case]
    err = refused([command, "tsk_1"], task, capsys)
    assert said in err and "Task" in err, err


@pytest.mark.parametrize("task, said", [
    ({"id": "tsk_1", "status": {"state": ["x"]}}, "whose status.state is not a string"),
    ({"id": "tsk_1"}, "without a status"),
])
def test_the_library_refuses_a_task_whose_state_cannot_be_read(task, said):
    """A2A's Task carries its status: ``get``, ``cancel`` and ``send`` returned a task without
    one, which only the CLI refused (a library caller met a KeyError at
    ``task["status"]``)."""
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
        else:
            sent = json.loads(request.body)["method"]
            rpc_answer(conn, request, {"task": task} if sent == "SendMessage" else task)
    with Hostile(handler) as door, A2AClient(door.url, timeout=WAIT) as client:
        for method, call in (("GetTask", lambda: client.get("tsk_1")),
                             ("CancelTask", lambda: client.cancel("tsk_1")),
                             ("SendMessage", lambda: client.send("hi"))):
            with pytest.raises(ProtocolError, match=f"answered {method} with a task {said}"):
                call()


def test_cancel_prints_nothing_of_a_task_it_cannot_read(cli_env, capsys):
    """An artifact that is not an object: ``cancel`` printed the task's id, then failed."""
    task = {"id": "tsk_1", "status": {"state": "TASK_STATE_CANCELED"}, "artifacts": [7]}
    with answering(task) as door:
        assert main(["cancel", "tsk_1", "--url", door.url, "--timeout", str(WAIT)]) == 0
    assert capsys.readouterr().out.startswith("task:     tsk_1\n")     # skipped, as get does
    task["artifacts"] = 7
    assert "cannot read" in refused(["cancel", "tsk_1"], task, capsys)


def test_stop_prints_nothing_of_an_answer_it_cannot_read(cli_env, capsys):
    answer_ = {"session_id": "ses_1", "canceled": ["tsk_1", 2], "residue": []}
    assert "cannot read" in refused(["stop"], answer_, capsys, **DOOR_CARD)


def test_push_list_prints_nothing_of_a_page_it_cannot_read(cli_env, capsys):
    configs = [{"id": "c1", "url": "https://hook.test/"},
               {"id": "c2", "url": "https://hook.test/", "deliveryStatus": "failing"}]
    assert "cannot read" in refused(["push", "list", "tsk_1"], {"configs": configs}, capsys)


@pytest.mark.parametrize("result", [[], "ok", True, 0, {"deleted": True}])
def test_push_delete_of_a_result_but_the_empty_one_is_exit_2(cli_env, capsys, result):
    """DeleteTaskPushNotificationConfig answers ``{}`` (google.protobuf.Empty), or ``null``
    where a server's result is void: any other answer said "deleted:", exit 0."""
    err = refused(["push", "delete", "tsk_1", "--config", "c1"], result, capsys)
    assert "not {} (the empty result)" in err and "may not be deleted" in err, err


@pytest.mark.parametrize("result", [{}, None])
def test_push_delete_of_the_empty_result_says_deleted(cli_env, capsys, result):
    """``{}``, or ``null``: a void result, as a server with no result type answers it."""
    with answering(result) as door:
        assert main(["push", "delete", "tsk_1", "--config", "c1", "--url", door.url]) == 0
    assert capsys.readouterr().out == "deleted:  c1 of task tsk_1\n"


@pytest.mark.parametrize("result", [None, [], "card", 7])
def test_an_extended_card_that_is_not_an_object_is_exit_2(cli_env, capsys, result):
    """GetExtendedAgentCard answers a card: anything else printed as it came, exit 0."""
    with answering(result, capabilities={"extendedAgentCard": True}) as door:
        argv = ["card", "--json", "--token", "t", "--url", door.url, "--timeout", str(WAIT)]
        assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    assert captured.err.count("\n") == 1 and "GetExtendedAgentCard" in captured.err \
        and "not an object" in captured.err, captured.err


@pytest.mark.parametrize("argv", [("send", "hi"), ("send", "hi", "--no-wait")])
def test_send_of_a_task_without_a_status_is_exit_2(cli_env, capsys, argv):
    """A task says how it stands by its status: without one, a held send said "is
    unknown", exit 1, and --no-wait printed the task's id, exit 0."""
    assert "SendMessage with a task without a status" in refused(
        list(argv), {"task": {"id": "tsk_1"}}, capsys)


def test_send_no_wait_answered_with_a_message_prints_it(cli_env, capsys):
    """An agent may answer at once with a message: --no-wait printed an empty task id and
    "task None is unknown in context None"."""
    with answering({"message": {"role": "ROLE_AGENT", "parts": [{"text": "hello"}]}}) as door:
        assert main(["send", "hi", "--no-wait", "--url", door.url, "--timeout", str(WAIT)]) == 0
    assert capsys.readouterr() == ("hello\n", "")



def test_the_library_refuses_a_message_without_parts():
    """SendMessage's answer at once, a message, carries its parts: the library returned one
    without them as it came, and only the CLI refused it (as "a task without a status")."""
    with answering({"message": {"role": "ROLE_AGENT"}}) as door, \
            A2AClient(door.url, timeout=WAIT) as client:
        with pytest.raises(ProtocolError, match="answered SendMessage with a message without "
                                                "parts"):
            client.send("hi")


@pytest.mark.parametrize("argv", [("send", "hi"), ("send", "hi", "--no-wait")])
def test_send_of_a_message_without_parts_is_exit_2(cli_env, capsys, argv):
    assert "SendMessage with a message without parts" in refused(
        list(argv), {"message": {"role": "ROLE_AGENT"}}, capsys)
