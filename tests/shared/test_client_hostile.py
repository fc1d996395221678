"""The client against hostile or broken servers: real sockets scripted byte by byte.

Each server is a ``Hostile`` (tests/shared/hostile_server.py) on a free loopback
port. What is checked: a credential never leaves the origin the caller named, no
answer grows the client's memory without bound or holds it past its timeouts, and
a malformed answer is one of the client's errors, never a traceback.
"""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.client import A2AClient, HttpRefusal
from tests.shared.hostile_server import Hostile, answer, card, rpc_answer

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
