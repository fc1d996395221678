"""Two doors and a hub mounted in one Flask site (Werkzeug's ``DispatcherMiddleware``), and
the host stacks around them: each application keeps its own tasks, credentials, counts and
cards; a host that read the body first, or buffers the answer, gets a clear answer."""
from __future__ import annotations

import io
import json
import logging

import pytest
from flask import Flask
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from murmur_wsgi import create_app
from murmur_wsgi.door.app import live_doors
from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.app import live_hubs
from murmur_wsgi.keyed_turns import STEP_KEY
from murmur_wsgi.uris import CARD_PATH
from tests.conftest import V1
from tests.hub.conftest import KEY_A, close_hub, hub_config, send_params
from tests.sse_util import EXT, msg

AUTH = {"scheme": "bearer", "credentials": {}}
HUB_CARD = "/hub/a2a/v1/agents/echo/.well-known/agent-card.json"


def door(name: str):
    return create_app({"name": name, "version": "1.0.0", "network": {"authentication": AUTH},
                       "observability": {"metrics": True, "access_log": True}})


@pytest.fixture
def site():
    doors = {"/a": door("alpha"), "/b": door("beta")}
    hub = create_hub(hub_config(mount_path="/hub"))
    flask_site = Flask(__name__)
    flask_site.wsgi_app = DispatcherMiddleware(flask_site.wsgi_app, {**doors, "/hub": hub})
    flask_site.apps = {**doors, "/hub": hub}
    yield flask_site
    for mounted in doors.values():
        mounted.close()
    close_hub(hub)


def bearer(mounted) -> dict:
    return {**V1, "Authorization": f"Bearer {mounted.tokens.tokens['operator']}"}


def rpc(method: str, params: dict) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def sent(mounted_at: str, site) -> int:
    """SendMessage calls the door mounted at ``mounted_at`` counted on its /metrics page."""
    page = site.test_client().get(mounted_at + "/metrics",
                                  headers=bearer(site.apps[mounted_at])).get_data(as_text=True)
    return sum(int(float(line.rpartition(" ")[2])) for line in page.splitlines()
               if line.startswith("murmur_requests_total{") and 'method="SendMessage"' in line)


def test_two_doors_and_a_hub_keep_their_own_tasks_credentials_counts_and_cards(site, caplog):
    client, apps = site.test_client(), site.apps
    caplog.set_level(logging.INFO, logger="murmur_wsgi.access")
    urls = [client.get(path + CARD_PATH).get_json()["supportedInterfaces"][0]["url"]
            for path in ("/a", "/b")]
    hub_card = client.get(HUB_CARD, headers={"X-API-Key": KEY_A}).get_json()
    assert urls + [hub_card["supportedInterfaces"][0]["url"]] == [
        "http://localhost/a", "http://localhost/b",
        "https://hub.example.com/hub/a2a/v1/agents/echo"]
    answer = client.post("/b", json=rpc("SendMessage", msg("to beta")), headers=bearer(apps["/b"]))
    task_id = answer.get_json()["result"]["task"]["id"]
    # beta's task is not alpha's, alpha's token is not beta's, and only beta counted it.
    assert client.post("/a", json=rpc("GetTask", {"id": task_id}),
                       headers=bearer(apps["/a"])).get_json()["error"]["code"] == -32001
    assert client.post("/b", json=rpc("ListTasks", {}),
                       headers=bearer(apps["/a"])).status_code == 401
    assert (sent("/a", site), sent("/b", site)) == (0, 1)
    hub_task = client.post("/hub/a2a/v1/agents/echo", json=rpc("SendMessage", send_params("hub")),
                           headers={**V1, "X-API-Key": KEY_A}).get_json()["result"]["task"]
    assert client.post("/b", json=rpc("GetTask", {"id": hub_task["id"]}),
                       headers=bearer(apps["/b"])).get_json()["error"]["code"] == -32001
    assert {apps["/a"], apps["/b"]} <= set(live_doors()) and apps["/hub"] in live_hubs()
    # Each door's access records name the path it was mounted at.
    paths = {record.murmur["path"] for record in caplog.records if record.name.endswith("access")}
    assert {"/a/metrics", "/b", "/a"} <= paths


def test_a_stream_flows_through_the_mount_and_its_end_releases_it(site):
    client, alpha = site.test_client(), site.apps["/a"]
    with client.post("/a", json=rpc("SendStreamingMessage", msg("/stream 3")),
                     headers={**bearer(alpha), **EXT}) as response:
        assert response.mimetype == "text/event-stream"
        first = next(response.response)
        assert first.startswith(b"data: ") and alpha.session.ring.streams == 1
    assert alpha.session.ring.streams == 0 and alpha.active.count == 0


def send_to_both(client, site, text: str) -> tuple:
    """The answers of the door at ``/a`` and of the hub's echo agent to a SendMessage."""
    door_answer = client.post("/a", json=rpc("SendMessage", msg(text)),
                              headers=bearer(site.apps["/a"]))
    hub_answer = client.post("/hub/a2a/v1/agents/echo", json=rpc("SendMessage",
                                                                  send_params(text)),
                             headers={**V1, "X-API-Key": KEY_A})
    return door_answer, hub_answer


def reads_the_body_first(app):
    """A host's middleware that reads the request's body and does not hand it back."""
    def host(environ, start_response):
        environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        return app(environ, start_response)
    return host


def test_a_body_the_host_read_first_is_answered_as_unreadable_and_logged(site, caplog):
    """The body is gone before the application reads it: no task is made of nothing; the
    door answers -32603 (its answer to a body it cannot read), the hub 400, and the log
    says how many of the declared bytes came."""
    client, host = site.test_client(), site.wsgi_app
    site.wsgi_app = reads_the_body_first(host)
    caplog.set_level(logging.INFO, logger="murmur_wsgi.serving.body")
    door_answer, hub_answer = send_to_both(client, site, "eaten")
    assert door_answer.get_json()["error"]["code"] == -32603
    assert hub_answer.status_code == 400 and "ended after 0 of" in \
        hub_answer.get_json()["error"]["message"]
    assert sum("ended after 0 of" in record.getMessage() for record in caplog.records) == 2
    site.wsgi_app = host
    listed = client.post("/a", json=rpc("ListTasks", {}), headers=bearer(site.apps["/a"]))
    assert listed.get_json()["result"]["tasks"] == []


def buffers_the_answer(app):
    """A host's middleware that writes an answer only once it has all of it."""
    def host(environ, start_response):
        body = app(environ, start_response)
        try:
            return [b"".join(body)]
        finally:
            body.close()
    return host


def test_a_stream_through_a_host_that_buffers_arrives_whole_when_it_ends(site):
    client, alpha = site.test_client(), site.apps["/a"]
    site.wsgi_app = buffers_the_answer(site.wsgi_app)
    data = client.post("/a", json=rpc("SendStreamingMessage", msg("/stream 2")),
                       headers={**bearer(alpha), **EXT}).get_data()
    events = [json.loads(line[len(b"data: "):]) for line in data.split(b"\n")
              if line.startswith(b"data: ")]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert alpha.session.ring.streams == 0 and alpha.active.count == 0


def behind_flask_views(apps: dict, max_content_length: int) -> Flask:
    """A Flask site whose views hand each request to the application mounted at its first
    path segment, with Flask's own stream of the body (``request.stream``: Werkzeug's
    ``LimitedStream``, bounded by the site's ``MAX_CONTENT_LENGTH``)."""
    from flask import Response, request

    host = Flask(__name__)
    host.config["MAX_CONTENT_LENGTH"] = max_content_length

    @host.post("/<mount>")
    @host.post("/<mount>/<path:rest>")
    def forward(mount, rest=""):
        environ = {**request.environ, "wsgi.input": request.stream,
                   "SCRIPT_NAME": "/" + mount, "PATH_INFO": "/" + rest if rest else ""}
        return Response.from_app(apps["/" + mount], environ)
    return host


# A chunked body through the test client (Werkzeug's input, terminated, as a server's).
CHUNKED = {"content_type": "application/json",
           "environ_overrides": {"wsgi.input_terminated": True}}


def _chunked_headers(site) -> tuple[dict, dict]:
    """The door's and the hub's headers of a chunked call: their credentials, chunked."""
    return ({**bearer(site.apps["/a"]), "Transfer-Encoding": "chunked"},
            {**V1, "X-API-Key": KEY_A, "Transfer-Encoding": "chunked"})


@pytest.mark.parametrize("size", [300, 100_000])
def test_a_body_past_the_hosts_own_limit_is_answered_as_too_large(site, caplog, size):
    """Flask's ``MAX_CONTENT_LENGTH`` makes its stream of a chunked body raise
    ``RequestEntityTooLarge`` (an HTTP error of code 413) when read past it: it was answered
    as a body that cannot be read (the door 200 -32603, the hub 400 "cannot be read"); each
    application answers it as a body past its own limit, 413 with -32600 and id null. The
    hub's message named its own limit (1048576 bytes), not the host's 200 that refused it."""
    host = behind_flask_views(site.apps, 200).test_client()
    caplog.set_level(logging.INFO, logger="murmur_wsgi.serving.body")
    door_headers, hub_headers = _chunked_headers(site)
    call = json.dumps(rpc("SendMessage", msg("x" * size))).encode()
    door_answer = host.post("/a", input_stream=io.BytesIO(call), headers=door_headers,
                            **CHUNKED)
    hub_answer = host.post("/hub/a2a/v1/agents/echo", input_stream=io.BytesIO(call),
                           headers=hub_headers, **CHUNKED)
    assert (door_answer.status_code, door_answer.get_json()) == (413, {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32600,
                                                "message": "Request payload validation error"}})
    assert (hub_answer.status_code, hub_answer.get_json()) == (413, {
        "jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": "the JSON-RPC body is larger than 200 bytes, its host's "
                                       "limit"}})
    assert sum("its host's limit of 200 bytes" in record.getMessage()
               for record in caplog.records) == 2
    small = json.dumps(rpc("ListTasks", {})).encode()
    listed = host.post("/a", input_stream=io.BytesIO(small), headers=door_headers, **CHUNKED)
    assert listed.get_json()["result"]["tasks"] == []


@pytest.mark.parametrize("size", [200, 201])
def test_a_chunked_body_of_exactly_the_hosts_limit_is_whole(site, size):
    """Flask's stream of a chunked body (Werkzeug's ``LimitedStream``, bounded by
    ``MAX_CONTENT_LENGTH``) raises ``RequestEntityTooLarge`` at a read at its limit whether
    the body ended there or not: a body of exactly the limit (200 bytes) was refused 413 by
    both applications. It is answered; one byte more is still refused."""
    host = behind_flask_views(site.apps, 200).test_client()
    door_headers, hub_headers = _chunked_headers(site)
    answers = []
    for path, call, headers in (
            ("/a", rpc("ListTasks", {}), door_headers),
            ("/hub/a2a/v1/agents/echo", rpc("GetTask", {"id": "none"}), hub_headers)):
        body = json.dumps(call).encode()
        body += b" " * (size - len(body))               # JSON's own whitespace
        answers.append(host.post(path, input_stream=io.BytesIO(body), headers=headers,
                                 **CHUNKED))
    door_answer, hub_answer = answers
    if size == 200:
        assert (door_answer.status_code, door_answer.get_json()["result"]) == (
            200, {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0})
        assert (hub_answer.status_code, hub_answer.get_json()["error"]["code"]) == (
            200, -32001)
    else:
        assert [answer.status_code for answer in answers] == [413, 413]


def test_a_chunked_body_at_the_hosts_limit_on_werkzeugs_server(site):
    """The same on Werkzeug's own server, whose chunked input (``DechunkedInput``) is under
    Flask's stream: a body of exactly the limit is answered, one of a byte more is 413."""
    import threading

    import requests
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, behind_flask_views(site.apps, 200), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/hub/a2a/v1/agents/echo"
    body = json.dumps(rpc("GetTask", {"id": "none"})).encode()
    try:
        answers = [requests.post(url, data=iter([body + b" " * (size - len(body))]),
                                 headers={**V1, "X-API-Key": KEY_A,
                                          "Content-Type": "application/json"}, timeout=10)
                   for size in (200, 201)]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert answers[0].request.headers["Transfer-Encoding"] == "chunked"
    assert [(answer.status_code, answer.json()["error"]["code"]) for answer in answers] == [
        (200, -32001), (413, -32600)]


def refuses_the_body_past(app, limit: int):
    """A host's middleware bounding the body its own way: its input raises Werkzeug's
    ``RequestEntityTooLarge`` past ``limit`` bytes, and says no number."""
    from werkzeug.exceptions import RequestEntityTooLarge

    class Bounded:
        def __init__(self, stream):
            self.stream, self.came = stream, 0

        def read(self, size: int = -1) -> bytes:
            data = self.stream.read(size)
            self.came += len(data)
            if self.came > limit:
                raise RequestEntityTooLarge()
            return data

    def host(environ, start_response):
        environ["wsgi.input"] = Bounded(environ["wsgi.input"])
        return app(environ, start_response)
    return host


def test_a_body_past_a_host_limit_that_names_no_number_is_refused_without_one(site):
    """A host whose refusal of a body names no limit: the hub answered that the body was
    larger than its own limit (1048576 bytes), which the 300 bytes sent are not; it names
    no number. The door's answer is its text's, which names none."""
    client = site.test_client()
    site.wsgi_app = refuses_the_body_past(site.wsgi_app, 100)
    door_answer, hub_answer = send_to_both(client, site, "x" * 300)
    assert (door_answer.status_code, door_answer.get_json()["error"]) == (413, {
        "code": -32600, "message": "Request payload validation error"})
    assert (hub_answer.status_code, hub_answer.get_json()) == (413, {
        "jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": "the JSON-RPC body is larger than its host's limit"}})


def wraps_the_input_with_a_bug(app, failure: Exception):
    """A host's middleware wrapping ``wsgi.input`` in a reader with a bug of its own."""
    class Wrapper:
        def read(self, size: int = -1) -> bytes:
            raise failure

    def host(environ, start_response):
        environ["wsgi.input"] = Wrapper()
        return app(environ, start_response)
    return host


@pytest.mark.parametrize("failure", [
    TypeError("read() takes 1 positional argument but 2 were given"),
    AttributeError("'NoneType' object has no attribute 'recv'"),
    NameError("name 'stream' is not defined")], ids=["type", "attribute", "name"])
def test_a_bug_in_the_hosts_input_wrapper_is_the_servers_failure(site, caplog, failure):
    """A host's wrapper of the input that fails of its own bug was answered as the client's
    body that cannot be read (the door -32603 with one INFO line, the hub 400 -32600): it
    is the server's failure, answered 200 -32603 "Internal error" and logged as an error
    with its traceback, as memory or the stack running out is."""
    client = site.test_client()
    site.wsgi_app = wraps_the_input_with_a_bug(site.wsgi_app, failure)
    caplog.set_level(logging.INFO, logger="murmur_wsgi")
    door_answer, hub_answer = send_to_both(client, site, "lost")
    for answer in (door_answer, hub_answer):
        error = answer.get_json()["error"]
        assert (answer.status_code, error["code"]) == (200, -32603)
        assert error["message"].startswith("Internal error")
    failed = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert [record.exc_info[0] for record in failed] == [type(failure)] * 2
    assert not any(record.name == "murmur_wsgi.serving.body" for record in caplog.records)


def test_a_door_request_after_a_hub_request_on_the_same_thread_runs_as_no_tenant(site):
    """A keep-alive connection's greenlet (here the test's thread) serves the door after the
    hub: the door's long steps (a large body's nesting checks, a data part's rendering)
    take no turns among the hub tenant's steps (murmur_wsgi/keyed_turns.py)."""
    client, apps = site.test_client(), site.apps
    client.post("/hub/a2a/v1/agents/echo", json=rpc("SendMessage", send_params("hub")),
                headers={**V1, "X-API-Key": KEY_A})
    assert STEP_KEY.get() == "acme"
    answer = client.post("/a", json=rpc("SendMessage", msg("to alpha")),
                         headers=bearer(apps["/a"]))
    assert answer.get_json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert STEP_KEY.get() is None
