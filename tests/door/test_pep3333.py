"""The door under ``wsgiref.validate`` and a strict server's checks (tests/pep3333.py): every
kind of answer (card, each method, each class of error, planes, /metrics, streams read to
their end or dropped after the first event, HEAD, OPTIONS) and every way a body comes."""
from __future__ import annotations

import json

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.uris import CARD_PATH
from tests.pep3333 import BODY_WAYS, Checked
from tests.sse_util import EXT, GateAgent, msg

MANIFEST = {"name": "checked", "version": "0.1.0", "stream": {"heartbeat_secs": 0.2},
            "network": {"authentication": {"scheme": "bearer", "credentials": {}}},
            "exports": {"files": {"root": "out/", "mode": "read-only"}},
            "observability": {"metrics": True}}


@pytest.fixture
def checked(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.txt").write_bytes(b"exported")
    agent = GateAgent()                     # the demo agent; /gate holds its task
    door = create_app(MANIFEST, agent, workdir=str(tmp_path))
    checked = Checked(door)
    checked.door = door
    checked.auth = {"Authorization": f"Bearer {door.tokens.tokens['operator']}",
                    "A2A-Version": "1.0"}
    yield checked
    agent.gate.set()
    door.close()


def call(checked, method, params=None, headers=None, **kwargs):
    body = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    response = checked.client.post("/", data=json.dumps(body), buffered=True,
                                   headers=checked.auth if headers is None else headers,
                                   content_type="application/json", **kwargs)
    return response.status_code, response.get_data()


def test_every_kind_of_answer_is_pep_3333(checked):
    client, auth = checked.client, checked.auth
    card = client.get(CARD_PATH, buffered=True)
    assert card.status_code == 200
    assert client.head(CARD_PATH, buffered=True).get_data() == b""
    assert client.get(CARD_PATH, headers={"If-None-Match": card.headers["ETag"]},
                      buffered=True).status_code == 304
    status, body = call(checked, "SendMessage", msg("checked"))
    task_id = json.loads(body)["result"]["task"]["id"]
    answers = [call(checked, "GetTask", {"id": task_id}), call(checked, "ListTasks", {}),
               call(checked, "CancelTask", {"id": task_id}),
               call(checked, "GetExtendedAgentCard", {}), call(checked, "Nope", {}),
               call(checked, "GetTask", {"id": 5}),
               call(checked, "GetTask", {"id": task_id}, {**auth, "A2A-Version": "9"})]
    assert [json.loads(body).get("error", {}).get("code") for _, body in answers] == [
        None, None, -32002, None, -32601, -32602, -32009]
    statuses = [client.post("/", data=data, headers=headers, content_type=kind,
                            buffered=True, environ_overrides=overrides).status_code
                for data, headers, kind, overrides in [
                    (b"{", auth, "application/json", {}),                   # -32700
                    (b"[]", auth, "application/json", {}),                  # -32600
                    (b"{}", {"A2A-Version": "1.0"}, "application/json", {}),    # 401
                    (b"{}", {"Authorization": "Bearer x"}, "application/json", {}),
                    (b"{}", auth, "text/plain", {}),                        # 404
                    (b"{}", auth, "application/json", {"CONTENT_LENGTH": str(10**12)})]]
    assert statuses == [200, 200, 401, 401, 404, 413]
    assert [client.open(path, method=verb, headers=auth, buffered=True).status_code
            for verb, path in [("OPTIONS", "/"), ("GET", "/"), ("HEAD", "/"), ("PUT", "/"),
                               ("GET", "/resources/files"), ("GET", "/resources/files/a.txt"),
                               ("HEAD", "/resources/files/a.txt"),
                               ("POST", "/resources/files/a.txt"), ("GET", "/metrics"),
                               ("HEAD", "/metrics"), ("GET", "/control")]] == [
        404, 404, 404, 404, 200, 200, 405, 405, 200, 200, 404]
    checked.assert_sound()


def test_a_stream_read_to_its_end_or_dropped_is_closed_and_released(checked):
    headers = {**checked.auth, **EXT}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                       "params": msg("/stream 2")})
    whole = checked.client.post("/", data=body, headers=headers,
                                content_type="application/json")
    assert whole.get_data().count(b"\ndata: ") + whole.get_data().startswith(b"data: ") >= 5
    whole.close()
    long = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "SendStreamingMessage",
                       "params": msg("/gate")})
    dropped = checked.client.post("/", data=long, headers=headers,
                                  content_type="application/json")
    first = next(iter(dropped.response)).partition(b"\n\n")[0]
    task_id = json.loads(first.partition(b"data: ")[2])["result"]["task"]["id"]
    assert checked.door.session.ring.streams == 1
    dropped.close()
    assert checked.door.session.ring.streams == 0 and checked.door.active.count == 0
    # The task, still held, followed (SubscribeToTask), and the door watched
    # (murmur.WatchSession): each dropped after its first event.
    for method, params in (("SubscribeToTask", {"id": task_id}), ("murmur.WatchSession", {})):
        opened = checked.client.post("/", headers=headers, content_type="application/json",
                                     data=json.dumps({"jsonrpc": "2.0", "id": 3,
                                                      "method": method, "params": params}))
        assert next(iter(opened.response)).startswith(b"data: "), method
        assert checked.door.session.ring.streams == 1
        opened.close()
        assert checked.door.session.ring.streams == 0 and checked.door.active.count == 0
    checked.assert_sound()


@pytest.mark.parametrize("way", list(BODY_WAYS))
def test_a_body_read_in_short_reads_is_whole(checked, way):
    data = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                       "params": msg("dribbled")}).encode()
    status, body = checked.raw_post("/", data, checked.auth, way)
    assert status == "200 OK"
    assert json.loads(body)["result"]["task"]["artifacts"][0]["parts"][0]["text"] == "dribbled"
    checked.assert_sound()
