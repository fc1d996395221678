"""A 401's hint, read from the card's securitySchemes: one line whatever their shape."""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.cli import main
from tests.shared.hostile_server import Hostile, answer, card

WAIT = 4.0

# NOTE: before, each made every command that met a 401 end in a traceback (an
# AttributeError raised while the HttpRefusal was being reported, which no handler of
# the command's took): the hint read the card's securitySchemes as A2A shapes them.
SCHEMES = [["x"], "x", 5, {"a": {"apiKeySecurityScheme": "x"}},
           {"a": {"apiKeySecurityScheme": {"name": 5}}},
           {"a": {"apiKeySecurityScheme": {"name": ["X-API-Key"]}}},
           {"a": {"httpAuthSecurityScheme": ["x"]}}, {"a": {"httpAuthSecurityScheme": 5}}]


@pytest.fixture
def cli_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path / "home"))
    for name in ("MURMUR_DOOR_URL", "MURMUR_DOOR_TOKEN", "MURMUR_API_KEY", "MURMUR_TENANT"):
        monkeypatch.delenv(name, raising=False)


def refusing_door(schemes):
    """A server whose card has ``schemes`` and whose every JSON-RPC call is a 401."""
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK",
                   json.dumps(card(server.url + "/", securitySchemes=schemes)).encode())
        else:
            answer(conn, "401 Unauthorized", b'{"error": "unauthenticated"}')
    return Hostile(handler)


@pytest.mark.parametrize("schemes", SCHEMES, ids=lambda v: json.dumps(v)[:40])
def test_a_401_beside_security_schemes_of_the_wrong_shape_is_one_line(cli_env, capsys,
                                                                       schemes):
    with refusing_door(schemes) as door:
        for argv in (("get", "t"), ("tasks",), ("cancel", "t"), ("send", "--no-wait", "hi")):
            assert main([*argv, "--url", door.url, "--timeout", str(WAIT)]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "refused the request: 401 unauthenticated" in err


def test_a_401_beside_well_formed_schemes_still_names_what_to_give(cli_env, capsys):
    schemes = {"k": {"apiKeySecurityScheme": {"name": "X-Key"}},
               "b": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
    with refusing_door(schemes) as door:
        assert main(["get", "t", "--url", door.url, "--timeout", str(WAIT)]) == 2
    err = capsys.readouterr().err
    assert "its card asks for --header 'X-Key: KEY', or --token TOKEN" in err, err


def test_a_servers_message_of_megabytes_is_cut_in_its_one_line(cli_env, capsys):
    """A JSON-RPC error's message is the server's: quoted in the refusal's line, one of
    4 MB was a line of 4 MB on stderr."""
    message = "m" * (4 * 1024 * 1024)

    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
        else:
            body = json.loads(request.body)
            answer(conn, "200 OK", json.dumps({"jsonrpc": "2.0", "id": body["id"], "error": {
                "code": -32001, "message": message}}).encode())
    with Hostile(handler) as door:
        assert main(["get", "t", "--url", door.url, "--timeout", str(WAIT)]) == 1   # refused
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 4200, len(err)
    assert err.rstrip("\n").endswith(" more characters)") and "-32001: mmm" in err
