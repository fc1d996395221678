"""The write path: a response body in pieces of at most the budget, under the socket's deadline."""
from __future__ import annotations

import contextlib
import socket
import tracemalloc

import pytest

from werkzeug.test import Client

from murmur_wsgi import create_app
from murmur_wsgi.serving.writes import SOCKET_KEY, Body, Timed, headers_only
from tests.conftest import Rpc


def test_pieces_are_cut_to_the_budget_and_closing_calls_done():
    done = []
    body = Body([b"a" * 10, b"bc"], lambda: done.append(True), budget=4)
    assert list(body) == [b"aaaa", b"aaaa", b"aa", b"bc"]
    body.close()
    body.close()
    assert done == [True]


@contextlib.contextmanager
def _pair(kind: str = "stdlib"):
    """Two connected sockets, the first with no timeout: the standard library's or gevent's."""
    if kind == "gevent":
        from gevent import socket as gevent_socket
        left, right = gevent_socket.socketpair()
    else:
        left, right = socket.socketpair()
    try:
        left.settimeout(None)
        yield left, right
    finally:
        left.close()
        right.close()


def test_the_socket_has_the_write_deadline_while_the_body_is_written_then_its_own():
    with _pair() as (left, _):
        body = Body([b"x"], lambda: None, sock=left, timeout=2.5, budget=1024)
        pieces = iter(body)
        assert next(pieces) == b"x"
        assert left.gettimeout() == 2.5
        body.close()
        assert left.gettimeout() is None


@pytest.mark.parametrize("kind", ["stdlib", "gevent"])
def test_a_small_answer_has_the_write_deadline_until_it_is_closed(kind):
    with _pair(kind) as (left, _):
        answer = Timed([b"x"], left, 2.5)
        assert list(answer) == [b"x"] and left.gettimeout() == 2.5
        answer.close()
        answer.close()
        assert left.gettimeout() is None
        assert Timed([b"y"], object(), 2.5) == [b"y"]     # not a socket: as it is


def test_a_head_answers_headers_are_written_under_the_deadline_on_the_door_too():
    with _pair() as (left, _):
        assert type(headers_only([b"body"])) is list               # no socket: as before
        door = create_app({"name": "d", "version": "0.1.0"}, listen="127.0.0.1:41873")
        environ = Client(door).get("/").request.environ             # a request's environ
        environ.update({"REQUEST_METHOD": "HEAD", SOCKET_KEY: left})
        answer = door(environ, lambda status, headers, exc_info=None: None)
        assert isinstance(answer, Timed) and list(answer) == []
        assert left.gettimeout() == door._write_timeout
        answer.close()
        assert left.gettimeout() is None
        door.close()


def test_a_client_that_does_not_take_a_write_times_out():
    """The deadline is the socket's: a write the peer does not read raises TimeoutError."""
    with _pair() as (left, right):
        right.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        body = Body([b"y" * (8 * 1024 * 1024)], lambda: None, sock=left, timeout=0.2,
                    budget=1024 * 1024)
        try:
            for piece in body:
                left.sendall(piece)
        except TimeoutError:
            timed_out = True
        else:
            timed_out = False
        body.close()
        assert timed_out
        assert left.gettimeout() is None


def test_the_door_writes_a_large_answer_in_pieces():
    door = create_app({"name": "a", "version": "1", "stream": {"pending_bytes": 1024}})
    text = "/ask " + "q" * 10_000
    rpc = Rpc(door)
    task = rpc.result("SendMessage", {"message": {"role": "ROLE_USER", "messageId": "m",
                                                  "parts": [{"text": text}]}})["task"]
    response = Client(door).post("/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                            "params": {"id": task["id"]}},
                                 headers={"A2A-Version": "1.0"}, buffered=False)
    pieces = list(response.response)
    response.close()
    assert max(len(piece) for piece in pieces) <= 1024 and len(pieces) > 9
    assert b"".join(pieces).count(b"q") == 10_000


def _big_task_door(pending: int, size: int):
    door = create_app({"name": "a", "version": "1", "stream": {"pending_bytes": pending}})
    for i in range(2):
        Rpc(door).result("SendMessage", {"message": {
            "role": "ROLE_USER", "messageId": f"m{i}", "parts": [{"text": "q" * size}]}})     # echoed: its answer
    return door


def _post(door, method: str, params: dict):
    return Client(door).post("/", json={"jsonrpc": "2.0", "id": 1, "method": method,
                                        "params": params},
                             headers={"A2A-Version": "1.0"}, buffered=False)


def _answer(door, method: str, params: dict) -> tuple[int, list[bytes]]:
    response = _post(door, method, params)
    try:
        return int(response.headers["Content-Length"]), list(response.response)
    finally:
        response.close()


def test_a_large_page_is_the_same_bytes_written_from_the_tasks_own_text():
    door = _big_task_door(1024, 20_000)
    task_id = Rpc(door).result("ListTasks", {})["tasks"][0]["id"]
    for method, params in [("ListTasks", {"includeArtifacts": True}),
                           ("GetTask", {"id": task_id})]:
        length, pieces = _answer(door, method, params)            # pieces of the shared text
        door.manifest.stream["pending_bytes"] = 10 ** 9
        whole_length, whole = _answer(door, method, params)       # one copy, as before
        door.manifest.stream["pending_bytes"] = 1024
        assert len(pieces) > 20 and max(map(len, pieces)) <= 1024
        assert b"".join(pieces) == b"".join(whole)
        assert length == whole_length == len(b"".join(whole))


def test_unread_large_answers_hold_no_copy_of_the_page():
    """Ten ListTasks(includeArtifacts) answers of 4 MB, started and never read."""
    door = _big_task_door(256 * 1024, 2 * 1024 ** 2)
    Rpc(door).result("ListTasks", {"includeArtifacts": True})      # the tasks' text cached
    tracemalloc.start()
    try:
        unread = [_post(door, "ListTasks", {"includeArtifacts": True}) for _ in range(10)]
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    for response in unread:
        assert int(response.headers["Content-Length"]) > 4 * 1024 ** 2
        response.close()
    # NOTE: each held its page, 4 MB, before: 40 MB for the ten.
    print(f"{held / 2 ** 20:.2f} MiB held by 10 unread answers")
    assert held < 2 * 1024 ** 2, f"{held / 2 ** 20:.1f} MiB held by 10 unread answers"
