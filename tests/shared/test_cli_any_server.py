"""The client's commands on what every A2A server shares: headers, rejections, data parts.

Against the Werkzeug-served doors of tests/shared/test_client.py (the hub's are
tests/e2e/hub/test_hub_client_e2e.py).
"""
from __future__ import annotations

import pytest

from murmur_wsgi.cli import main
from murmur_wsgi.client import A2AClient, DoorClient
from murmur_wsgi.client import render
from murmur_wsgi.client.events import StreamEvent
from tests.shared.test_client import DEMO, WAIT, Tap, ThreadedDoor


@pytest.fixture(autouse=True)
def no_ambient_door(monkeypatch, tmp_path):
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path / "home"))
    for name in ("MURMUR_DOOR_URL", "MURMUR_DOOR_TOKEN", "MURMUR_API_KEY", "MURMUR_TENANT"):
        monkeypatch.delenv(name, raising=False)


def cli(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_no_wait_rejected_by_a_busy_door_exits_1(capsys):
    single = dict(DEMO, lifecycle={"task_acceptance": "single"})
    with ThreadedDoor(single) as served:
        status, out, _ = cli(capsys, "send", "--no-wait", "/sleep 30", "--url", served.url)
        assert status == 0 and out.startswith("tsk_")
        status, out, err = cli(capsys, "send", "--no-wait", "again", "--url", served.url)
        assert (status, out) == (1, "")
        assert err.startswith("murmur-wsgi: task ") and " rejected" in err
        assert cli(capsys, "cancel", out.strip() or "x", "--url", served.url)[0] == 1


def test_headers_and_credentials_go_with_every_request(capsys):
    with ThreadedDoor(wrap=Tap) as served:
        status, _, err = cli(capsys, "get", "tsk_nosuch", "--url", served.url,
                             "--api-key", "k-1", "--tenant", "t-1", "--header", "X-One: 1")
        assert status == 1 and "-32001" in err
        assert [c["path"] for c in served.app.calls] == ["/.well-known/agent-card.json", "/"]
    with ThreadedDoor() as served, A2AClient(served.url, api_key="k", tenant="t",
                                             headers={"X-Two": "2"}, timeout=WAIT) as client:
        response = client.session.get(client.card_url, timeout=WAIT, headers=client.headers)
        sent = response.request.headers
        assert (sent["X-API-Key"], sent["X-Tenant-ID"], sent["X-Two"]) == ("k", "t", "2")
        announced = client.card()["supportedInterfaces"][0]["url"]
        assert client.endpoint == announced == served.url.replace("127.0.0.1", "localhost")
        assert client.noun == "the door"
    assert DoorClient is A2AClient


@pytest.mark.parametrize("value, shown", [
    ("no-colon", "'no-colon …'"), (": empty name", "one with no name"),
    ("Two Words: x", "'Two …'"), ("X-API-Key mhk_secret", "'X-API-Key …'"),
    ("Authorization: Bearer secret\r\nX-Two: 2", "'Authorization …'")])
def test_a_header_that_is_not_name_value_is_a_usage_error(capsys, value, shown):
    """Named by its first word: a value typed without its colon is a key or a token."""
    status, out, err = cli(capsys, "get", "tsk_x", "--url", "http://127.0.0.1:9",
                           "--header", value)
    assert (status, out) == (2, "")
    assert err == (f"murmur-wsgi: --header: {shown} is not 'Name: value' (its value is not "
                   "shown)\n")
    assert "secret" not in err


@pytest.mark.parametrize("option, value, named", [
    ("--token", "secret-token\r", "Authorization"), ("--api-key", " secret-key", "X-API-Key"),
    ("--tenant", "secret\nX-Two: 2", "X-Tenant-ID")], ids=["token-cr", "key-space", "tenant-lf"])
def test_a_credential_requests_cannot_send_is_named_never_shown(capsys, option, value, named):
    """requests refuses the value with a text that quotes it: a token read from a file with
    its \\r was printed whole."""
    argv = ["get", "tsk_x", "--url", "http://127.0.0.1:9", option, value]
    if option == "--tenant":
        argv += ["--token", "jwt"]
    status, out, err = cli(capsys, *argv)
    assert (status, out) == (2, "")
    assert f"the value of {named} holds a line break or begins with a space" in err
    assert "secret" not in err


def test_a_card_url_is_the_agent():
    client = A2AClient("http://127.0.0.1:9/a2a/v1/agents/echo/.well-known/agent-card.json")
    assert client.url == "http://127.0.0.1:9/a2a/v1/agents/echo"
    assert client.card_url == client.url + "/.well-known/agent-card.json"
    assert client.noun == "the agent"


def test_a_data_part_artifact_prints_as_json():
    event = StreamEvent.from_result({"artifactUpdate": {
        "taskId": "tsk_1", "artifact": {"artifactId": "answer",
                                        "parts": [{"data": {"words": 3}}]}}})
    assert render.event_line(event, False) == '[artifact]    answer: {"words":3}'
    task = {"status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "answer", "parts": [
                {"data": {"words": 3}}, {"data": {"usage": {"input_tokens": 1}}}]}]}
    assert render.response_of(task) == '{"words":3}'


def test_the_401_hint_names_the_cards_scheme(capsys):
    manifest = dict(DEMO, network={"authentication": {"scheme": "bearer"}})
    with ThreadedDoor(manifest) as served:
        status, _, err = cli(capsys, "get", "tsk_x", "--url", served.url)
    assert status == 2
    assert err.endswith("; its card asks for --token TOKEN (or $MURMUR_DOOR_TOKEN; "
                        "murmur-wsgi token prints a door's)\n")
