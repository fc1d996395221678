"""``DoorClient`` against a real door on a real socket: every method, every error shape.

``requests`` needs a server: ``ThreadedDoor`` serves ``create_app(...)`` on
Werkzeug's threaded server on a free loopback port, in this process, which
starts in milliseconds (the gunicorn door is for tests/e2e). ``Tap`` wraps a
door to record what each request carried and, once, to cut a stream's
connection after a number of events, as a network would.
"""
from __future__ import annotations

import io
import json
import socket
import threading

import pytest
from werkzeug.serving import WSGIRequestHandler, make_server

from murmur_wsgi import create_app
from murmur_wsgi.client import (ConnectionFailed, DoorClient, HttpRefusal, MethodNotFound,
                                TaskNotCancelable, TaskNotFound, UnsupportedOperation,
                                VersionError)

WAIT = 10.0                     # seconds any wait in these tests may take at most
DEMO = {"name": "test-agent", "version": "0.1.0", "agent": "demo",
        "lifecycle": {"task_acceptance": "queue", "queue_depth": 8}}
AUTH = {"scheme": "bearer", "credentials": {"watcher": {"scopes": ["GetTask"]}}}


class _Quiet(WSGIRequestHandler):
    def log_request(self, *args, **kwargs):
        pass


class ThreadedDoor:
    """A door served on Werkzeug's threaded server, on a free loopback port."""

    def __init__(self, manifest: dict | None = None, *, wrap=None, app=None, **create):
        self.server = make_server("127.0.0.1", 0, self._wsgi, threaded=True,
                                  request_handler=_Quiet)
        self.address = f"127.0.0.1:{self.server.server_port}"
        self.url = "http://" + self.address
        self.door = app if app is not None else create_app(
            manifest or DEMO, listen=self.address, **create)
        self.app = wrap(self.door) if wrap else self.door
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)

    def _wsgi(self, environ, start_response):
        return self.app(environ, start_response)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        close = getattr(self.door, "close", None)
        if close is not None:
            close()                     # ends every stream with capsule-closed
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(WAIT)
        assert not self.thread.is_alive()


class Tap:
    """WSGI middleware: record each request; cut one method's stream after N events."""

    def __init__(self, app, cut_method: str | None = None, cut_after: int = 0):
        self.app = app
        self.calls: list[dict] = []
        self.cond = threading.Condition()
        self.cut_method = cut_method
        self.cut_after = cut_after

    def __call__(self, environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)
        try:
            method = json.loads(body).get("method") if body else None
        except ValueError:
            method = None
        call = {"method": method, "path": environ.get("PATH_INFO"),
                "version": environ.get("HTTP_A2A_VERSION"),
                "authorization": environ.get("HTTP_AUTHORIZATION"),
                "extensions": environ.get("HTTP_A2A_EXTENSIONS"),
                "last_event_id": environ.get("HTTP_LAST_EVENT_ID")}
        with self.cond:
            self.calls.append(call)
            self.cond.notify_all()
        result = self.app(environ, start_response)
        if method is not None and method == self.cut_method:
            self.cut_method = None
            return self._cut(result, environ["werkzeug.socket"])
        return result

    def _cut(self, result, sock):
        """Pass ``cut_after`` events, then drop the connection mid-stream."""
        passed = 0
        try:
            for chunk in result:
                events = chunk.split(b"\n\n")[:-1]
                for event in events:
                    yield event + b"\n\n"
                    passed += 1
                    if passed >= self.cut_after:
                        sock.shutdown(socket.SHUT_RDWR)
                        raise ConnectionAbortedError("cut by the test")
        finally:
            result.close()

    def methods(self) -> list[str]:
        return [c["method"] for c in self.calls if c["method"]]

    def wait_for(self, method: str) -> dict:
        with self.cond:
            assert self.cond.wait_for(lambda: method in self.methods(), WAIT), self.methods()
            return next(c for c in self.calls if c["method"] == method)


@pytest.fixture(scope="module")
def served():
    with ThreadedDoor(wrap=Tap) as door:
        yield door


@pytest.fixture
def client(served):
    with DoorClient(served.url, timeout=WAIT) as door:
        yield door


def wait_state(client, task_id: str, states) -> dict:
    """Follow ``task_id`` on SubscribeToTask until it reaches one of ``states``."""
    task = client.get(task_id)
    if task["status"]["state"] in states:
        return task
    with client.subscribe(task_id, frames=False) as stream:
        for event in stream:
            if event.task_id == task_id and event.state in states:
                break
    return client.get(task_id)


# --- the methods ------------------------------------------------------------------------


def test_card_and_headers(served, client):
    card = client.card()
    assert card["name"] == "test-agent"
    with pytest.raises(TaskNotFound):
        client.get("tsk_nope")
    call = [c for c in served.app.calls if c["method"] == "GetTask"][-1]
    assert call["version"] == "1.0"
    assert call["authorization"] is None
    assert client.session is client.session          # one pooled session per client


def test_send_held_answers_the_settled_task(client):
    task = client.send("hello there")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["text"] == "hello there"


def test_send_return_immediately_then_follow(client):
    task = client.send("/sleep 0.2\ndone", return_immediately=True)
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    final = wait_state(client, task["id"], {"TASK_STATE_COMPLETED"})
    assert final["artifacts"][0]["parts"][0]["text"] == "done"


def test_input_required_then_reply(client):
    asked = client.send("/ask Which branch?", context_id="ctx-reply-test")
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert asked["artifacts"][0]["artifactId"] == "prompt"
    assert asked["artifacts"][0]["parts"][0]["text"] == "Which branch?"
    done = client.send("main", context_id=asked["contextId"], task_id=asked["id"])
    assert done["id"] == asked["id"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"][0]["text"] == "main"


def test_stream_yields_task_frames_artifact_and_terminal_status(served, client):
    stream = client.stream("/stream 3")
    events = list(stream)
    assert events[0].kind == "task"
    assert [e.fields["text"] for e in events if e.frame == "text"] == [
        "chunk 1", "chunk 2", "chunk 3"]
    assert any(e.kind == "artifactUpdate" for e in events)
    assert events[-1].kind == "statusUpdate" and events[-1].state == "TASK_STATE_COMPLETED"
    assert stream.ended == "terminal" and stream.reconnects == 0
    numbered = [e.id for e in events if e.id is not None]
    assert numbered == sorted(numbered) and len(set(numbered)) == len(numbered)
    call = [c for c in served.app.calls if c["method"] == "SendStreamingMessage"][-1]
    assert call["extensions"].endswith("#murmur-stream-v1")


def test_stream_without_frames_carries_only_a2a_events(client):
    events = list(client.stream("/stream 2", frames=False))
    assert {e.kind for e in events} <= {"task", "statusUpdate", "artifactUpdate"}
    assert events[-1].state == "TASK_STATE_COMPLETED"


def test_list_walks_every_page_with_filters(client):
    context = "ctx-list-walk"
    ids = {client.send(f"task {i}", context_id=context)["id"] for i in range(3)}
    page = client.list_page(context_id=context, page_size=1)
    assert page["totalSize"] == 3 and page["nextPageToken"]
    assert {t["id"] for t in client.list(context_id=context, page_size=1)} == ids
    done = list(client.list(context_id=context, state="TASK_STATE_COMPLETED"))
    assert len(done) == 3
    assert list(client.list(context_id=context, state="TASK_STATE_FAILED")) == []


def test_cancel_and_cancel_again(client):
    task = client.send("/sleep 30", return_immediately=True)
    canceled = client.cancel(task["id"])
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    with pytest.raises(TaskNotCancelable) as info:
        client.cancel(task["id"])
    assert info.value.code == -32002
    assert info.value.reason == "TASK_NOT_CANCELABLE"
    assert info.value.metadata == {"taskId": task["id"], "state": "TASK_STATE_CANCELED"}


def test_subscribe_follows_input_required_and_the_reply(client):
    task = client.send("/ask Name?", return_immediately=True)
    states = []
    with client.subscribe(task["id"]) as stream:
        for event in stream:
            if event.state:
                states.append(event.state)
            if event.state == "TASK_STATE_INPUT_REQUIRED":
                client.send("Ada", context_id=task["contextId"], task_id=task["id"],
                            return_immediately=True)
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert "TASK_STATE_INPUT_REQUIRED" in states
    assert stream.ended == "terminal"
    assert client.get(task["id"])["artifacts"][0]["parts"][0]["text"] == "Ada"


def test_watch_sees_tasks_until_the_door_closes():
    with ThreadedDoor(wrap=Tap) as served, DoorClient(served.url, timeout=WAIT) as client:
        stream = client.watch()
        first = next(stream)
        assert first.frame == "connection-ack" and first.fields["role"] == "observer"
        task = client.send("watched")
        seen = []
        for event in stream:
            seen.append(event)
            if event.task_id == task["id"] and event.terminal:
                served.door.close()
        assert stream.ended == "capsule-closed"
        assert seen[-1].frame == "capsule-closed"
        assert any(e.task_id == task["id"] for e in seen)


def test_stop_cancels_every_live_task():
    with ThreadedDoor() as served, DoorClient(served.url, timeout=WAIT) as client:
        task = client.send("/sleep 30", return_immediately=True)
        answer = client.stop()
        assert answer["canceled"] == [task["id"]]
        assert answer["residue"] == [] and answer["session_id"].startswith("ses_")
        assert client.stop()["canceled"] == []


# --- reconnecting ---------------------------------------------------------------------


def test_stream_resumes_with_subscribe_and_last_event_id():
    with ThreadedDoor(wrap=lambda app: Tap(app, "SendStreamingMessage", cut_after=3)) as served, \
            DoorClient(served.url, timeout=WAIT, reconnect_delay=0) as client:
        stream = client.stream("/ask Which?")
        events, replied = [], False
        for event in stream:
            events.append(event)
            # NOTE: the resumed stream opens with the task's snapshot, input-required again.
            if event.state == "TASK_STATE_INPUT_REQUIRED" and not replied:
                replied = True
                client.send("this one", context_id=event.context_id, task_id=stream.task_id,
                            return_immediately=True)
        assert stream.reconnects == 1 and stream.ended == "terminal"
        resume = served.app.wait_for("SubscribeToTask")
        assert resume["last_event_id"] is not None
        numbered = [e.id for e in events if e.id is not None]
        assert len(numbered) == len(set(numbered))          # nothing handed over twice
        assert events[-1].state == "TASK_STATE_COMPLETED"


# --- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["message/send", "message/stream", "tasks/get",
                                    "tasks/cancel", "stream/watch", "session/stop",
                                    "agent/getAuthenticatedExtendedCard"])
def test_a2a_0_3_method_names_get_method_not_found(client, method):
    with pytest.raises(MethodNotFound) as info:
        client.call(method, {"id": "tsk_x"})
    assert info.value.code == -32601
    assert info.value.response.status_code == 200
    assert info.value.request.headers["A2A-Version"] == "1.0"


def test_version_error_carries_the_versions(served):
    with DoorClient(served.url, a2a_version="0.3", timeout=WAIT) as old:
        with pytest.raises(VersionError) as info:
            old.get("tsk_x")
    assert info.value.code == -32009 and info.value.reason == "VERSION_NOT_SUPPORTED"
    assert info.value.requested_version == "0.3"
    assert info.value.supported_versions == "1.0"


def test_public_door_has_no_extended_card(client):
    with pytest.raises(UnsupportedOperation) as info:
        client.extended_card()
    assert info.value.domain == "a2a-protocol.org"


def test_connection_failed_names_the_door():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with DoorClient(f"127.0.0.1:{port}", timeout=WAIT) as client:
        with pytest.raises(ConnectionFailed) as info:
            client.card()
    assert str(info.value) == f"cannot reach the door at http://127.0.0.1:{port}: " \
        "connection refused"
    assert info.value.url == f"http://127.0.0.1:{port}"


def test_authenticated_door_refusals_and_bearer():
    manifest = dict(DEMO, network={"authentication": AUTH})
    with ThreadedDoor(manifest, wrap=Tap) as served:
        token = served.door.tokens.tokens["operator"]
        with DoorClient(served.url, timeout=WAIT) as anonymous:
            with pytest.raises(HttpRefusal) as info:
                anonymous.get("tsk_x")
            assert anonymous.card()["capabilities"]["extendedAgentCard"] is True
        assert (info.value.status, info.value.error) == (401, "unauthenticated")
        assert info.value.response.headers["WWW-Authenticate"].startswith("Bearer")
        with DoorClient(served.url, token, timeout=WAIT) as operator:
            extended = operator.extended_card()
            with pytest.raises(TaskNotFound):
                operator.get("tsk_x")
        assert served.app.calls[-1]["authorization"] == f"Bearer {token}"
        uris = [e["uri"] for e in extended["capabilities"]["extensions"]]
        assert any(uri.endswith("#murmur-capsule-v1") for uri in uris)
        watcher_token = served.door.tokens.tokens["watcher"]
        with DoorClient(served.url, watcher_token, timeout=WAIT) as watcher:
            with pytest.raises(HttpRefusal) as info:
                watcher.send("hi")
        assert (info.value.status, info.value.error) == (403, "insufficient_scope")
        assert info.value.message == "credential 'watcher' does not reach SendMessage"
