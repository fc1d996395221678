"""The door mounted in Flask and Django (examples/), driven through their own test clients.

Also what an embedding host sees when it closes the door, and ``after_task: exit``.
"""
from __future__ import annotations

import os
import re
import sys
import threading
from pathlib import Path

import pytest
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.test import Client

from murmur_wsgi import create_app
from murmur_wsgi.door.app import live_doors
from murmur_wsgi.uris import CARD_PATH
from tests.conftest import V1
from tests.sse_util import DEADLINE, EXT, GateAgent, SseStream, msg, parse_body, shape

REPO = Path(__file__).resolve().parents[2]
DJANGO_DIR = REPO / "examples" / "django_project"
MANIFEST = {"name": "mounted", "version": "0.1.0", "stream": {"heartbeat_secs": 0.2}}


def rpc_body(method: str, params: dict, request_id=1) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def interface_url(card: dict) -> str:
    [interface] = card["supportedInterfaces"]
    return interface["url"]


# --- Flask -------------------------------------------------------------------------


@pytest.fixture
def flask_site():
    from examples.flask_app import create_app as create_site

    site = create_site(dict(MANIFEST))
    yield site
    site.extensions["murmur_door"].close()


def test_flask_serves_its_routes_and_the_door_under_the_prefix(flask_site):
    client = flask_site.test_client()
    assert client.get("/").get_json() == {"site": "flask example", "a2a": "/a2a"}
    card = client.get("/a2a" + CARD_PATH)
    assert card.status_code == 200
    assert interface_url(card.get_json()) == "http://localhost/a2a"
    # Flask's own 404 outside the mount, the door's JSON 404 inside it.
    assert client.get("/nope").mimetype == "text/html"
    inside = client.get("/a2a/nope")
    assert inside.status_code == 404 and inside.get_json()["error"] == "not_found"


@pytest.mark.parametrize("path", ["/a2a", "/a2a/"])
def test_flask_posts_json_rpc_at_the_cards_url(flask_site, path):
    client = flask_site.test_client()
    response = client.post(path, json=rpc_body("SendMessage", msg("hello")), headers=V1)
    task = response.get_json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["text"] == "hello"


def test_flask_streams_through_the_mount(flask_site):
    client = flask_site.test_client()
    response = client.post("/a2a", json=rpc_body("SendStreamingMessage", msg("/stream 2")),
                           headers={**V1, **EXT})
    assert response.mimetype == "text/event-stream"
    events, _ = parse_body(response.get_data(), 1)
    assert shape(events) == ["task/TASK_STATE_SUBMITTED", "connection-ack",
                             "status/TASK_STATE_WORKING", "text", "text", "artifact/response",
                             "status/TASK_STATE_COMPLETED"]


def test_the_card_names_the_hosts_scheme_and_host():
    from examples.flask_app import create_app as create_site

    site = create_site(dict(MANIFEST))
    client = site.test_client()
    card = client.get("/a2a" + CARD_PATH, base_url="https://site.example/").get_json()
    site.extensions["murmur_door"].close()
    assert interface_url(card) == "https://site.example/a2a"


def test_public_url_wins_over_the_mount():
    from examples.flask_app import create_app as create_site

    manifest = dict(MANIFEST, network={"public_url": "https://agents.example.com/a2a"})
    site = create_site(manifest)
    card = site.test_client().get("/a2a" + CARD_PATH).get_json()
    site.extensions["murmur_door"].close()
    assert interface_url(card) == "https://agents.example.com/a2a"


# RFC 3986's characters of a URL: what a valid card's URL is made of, escapes well formed.
URL_CHARS = re.compile(r"(?:[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=-]|%[0-9A-Fa-f]{2})+\Z")


def announced(manifest: dict, path: str = CARD_PATH, mount: str | None = None, **get) -> str:
    """The card's URL of a door of ``manifest`` (mounted at ``mount``), read at ``path``; it
    must be a URL."""
    door = create_app(manifest)
    try:
        site = DispatcherMiddleware(lambda environ, start: [], {mount: door}) if mount else door
        url = interface_url(Client(site).get(path, **get).get_json())
    finally:
        door.close()
    assert URL_CHARS.match(url), url
    return url


@pytest.mark.parametrize("mount, url", [
    ("/a2a", "http://localhost/a2a"),
    ("/my agents", "http://localhost/my%20agents"),
    ("/caf\xc3\xa9/50%", "http://localhost/caf%C3%A9/50%25"),      # WSGI's latin-1 of UTF-8
    ("/a\"b<c>{d}|^`", "http://localhost/a%22b%3Cc%3E%7Bd%7D%7C%5E%60"),
    ("/x;v=1/@me:8,(ok)!*'$&+", "http://localhost/x;v=1/@me:8,(ok)!*'$&+"),
])
def test_a_mount_path_is_percent_encoded_in_the_cards_url(mount, url):
    """WSGI hands SCRIPT_NAME percent-decoded: a door mounted at ``/my agents`` announced
    ``http://localhost/my agents``, not a URL (RFC 3986). Each byte outside a path's
    characters is percent-encoded; a path of them alone is as before."""
    path = url.removeprefix("http://localhost")
    assert announced(dict(MANIFEST), path + CARD_PATH, mount) == url


@pytest.mark.parametrize("public_url, url", [
    ("https://agents.example.com/my%20agents", "https://agents.example.com/my%20agents"),
    ("https://agents.example.com/caf\u00e9/a<b>", "https://agents.example.com/caf%C3%A9/a%3Cb%3E"),
    ("https://b\u00fccher.example:8443/a", "https://xn--bcher-kva.example:8443/a"),
    ("https://agents.example.com/50%/x%2F", "https://agents.example.com/50%25/x%2F"),
])
def test_a_public_url_is_announced_as_a_valid_url(public_url, url):
    """The manifest's URL check takes a path of any characters and an internationalized
    host; the card announced them as they were, not a URL (RFC 3986)."""
    assert announced(dict(MANIFEST, network={"public_url": public_url})) == url


@pytest.mark.parametrize("host, url", [
    ("site.example:8443", "http://site.example:8443"),
    ("[::1]:8080", "http://[::1]:8080"),
    ("a b<c>", "http://localhost:80"),
    ("caf\xc3\xa9.example", "http://localhost:80"),
    ("evil.example/x?", "http://localhost:80"),
])
def test_a_host_that_is_not_a_urls_is_not_announced(host, url):
    """An embedded door without ``listen`` names the request's Host: ``a b<c>`` was
    announced as ``http://a b<c>``, not a URL. Such a Host gives way to the server's own
    name and port (SERVER_NAME, SERVER_PORT)."""
    assert announced(dict(MANIFEST), headers={"Host": host}) == url


# --- Django ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def django_application():
    sys.path.insert(0, str(DJANGO_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djsite.settings")
    try:
        from djsite.a2a import build_application

        application = build_application(dict(MANIFEST))
        yield application
        application.door.close()
    finally:
        sys.path.remove(str(DJANGO_DIR))


def test_django_test_client_reaches_the_django_views(django_application):
    from django.test import Client as DjangoClient

    client = DjangoClient()
    assert client.get("/").json() == {"site": "django example", "a2a": "/a2a"}
    assert client.get("/health").json() == {"ok": True}


def test_django_wrapper_sends_the_prefix_to_the_door(django_application):
    client = Client(django_application)
    card = client.get("/a2a" + CARD_PATH)
    assert interface_url(card.get_json()) == "http://localhost/a2a"
    assert client.get("/").get_json() == {"site": "django example", "a2a": "/a2a"}
    # Only a whole path segment is the mount: /a2ax is Django's (and its 404).
    assert client.get("/a2ax").status_code == 404
    assert "error" not in (client.get("/a2ax").get_data(as_text=True))
    response = client.post("/a2a", json=rpc_body("SendMessage", msg("hi django")), headers=V1)
    assert response.get_json()["result"]["task"]["artifacts"][0]["parts"][0]["text"] == \
        "hi django"


def test_django_site_mounted_itself_under_a_script_name(django_application):
    outer = DispatcherMiddleware(lambda e, s: [], {"/site": django_application})
    card = Client(outer).get("/site/a2a" + CARD_PATH).get_json()
    assert interface_url(card) == "http://localhost/site/a2a"


# --- the host closes the door, after_task: exit ----------------------------------------


def test_closing_an_embedded_door_answers_held_requests_and_ends_streams():
    from examples.flask_app import create_app as create_site

    agent = GateAgent()                       # the demo agent, but /gate holds the task
    flask_site = create_site(dict(MANIFEST), agent)
    door = flask_site.extensions["murmur_door"]
    answers = []

    def held():
        with flask_site.test_client().post(
                "/a2a", json=rpc_body("SendMessage", msg("/gate")), headers=V1) as response:
            answers.append(response.get_json())

    thread = threading.Thread(target=held)
    thread.start()
    try:
        assert agent.started.wait(DEADLINE)
        watch_response = Client(flask_site).post(
            "/a2a", json=rpc_body("murmur.WatchSession", {}), headers=V1)
        watch = SseStream(watch_response, 1)
        assert watch.next().frame_name == "connection-ack"
        door.close()
        thread.join(DEADLINE)
        assert not thread.is_alive()
        events = watch.rest()
        watch.close()
    finally:
        agent.gate.set()
    task = answers[0]["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_WORKING"      # as it stood when it closed
    assert events[-1].frame_name == "capsule-closed"
    assert door.active.wait_idle(DEADLINE)
    assert door not in live_doors()


def test_after_task_exit_closes_after_the_first_task_ends():
    agent = GateAgent()
    door = create_app(dict(MANIFEST, lifecycle={"after_task": "exit"}), agent)
    stopped = threading.Event()
    door.stop_server = stopped.set
    client = Client(door)
    answers = []
    thread = threading.Thread(target=lambda: answers.append(
        Client(door).post("/", json=rpc_body("SendMessage", msg("/gate")),
                          headers=V1).get_json()))
    thread.start()
    try:
        assert agent.started.wait(DEADLINE)
        # A task rejected while the first runs never ran: it does not end the session.
        busy = client.post("/", json=rpc_body("SendMessage", msg("second")), headers=V1)
        assert busy.get_json()["result"]["task"]["status"]["state"] == "TASK_STATE_REJECTED"
        assert not stopped.is_set() and not door.session.closing
    finally:
        agent.gate.set()
    thread.join(DEADLINE)
    assert stopped.wait(DEADLINE)
    assert answers[0]["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert door.session.closing and door.session.ring.closed
    after = client.post("/", json=rpc_body("SendMessage", msg("third")), headers=V1)
    status = after.get_json()["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_REJECTED"
    assert status["message"]["parts"][0]["text"] == "task rejected: the session is closing"
    assert door.session.open_streams() == 0


class ClosingBadly:
    """An agent with a ``close`` of its own that raises (the session calls it as it ends)."""

    def __call__(self, ctx):
        return "done"

    def close(self):
        raise RuntimeError("the agent's close failed")


def test_an_agent_whose_close_raises_still_ends_the_session(caplog, tmp_path, monkeypatch):
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path))
    door = create_app(dict(MANIFEST, lifecycle={"after_task": "exit"}), ClosingBadly(),
                      trace=True)
    stopped = threading.Event()
    door.stop_server = stopped.set
    answer = Client(door).post("/", json=rpc_body("SendMessage", msg("hello")), headers=V1)
    assert answer.get_json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert stopped.wait(DEADLINE)                 # after_task: exit still stops the server
    assert door.session.closing and door.session.ring.closed
    assert door.session.trace._fd is None            # the trace was closed too
    assert any("close failed" in r.getMessage() for r in caplog.records)


def test_after_task_sleep_keeps_the_door_open():
    door = create_app(dict(MANIFEST))
    response = Client(door).post("/", json=rpc_body("SendMessage", msg("hello")), headers=V1)
    assert response.get_json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert not door.session.closing and door in live_doors()
    door.close()
    door.close()                                  # idempotent
    assert door not in live_doors()
