"""The hub as a real process: ``murmur-wsgi hub`` under gunicorn -k gevent, driven by a2a-sdk.

Every answer the SDK gives is its own strict parse of what the hub wrote. The
SDK presents the tenant's API key as ``X-API-Key`` on every request, the card
fetch included. Then the parts only a real server shows: SIGTERM's drain, and a
blocking client that leaves.
"""
from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import time
import uuid

import pytest
import requests
import yaml
from a2a.types.a2a_pb2 import (CancelTaskRequest, GetTaskRequest, ListTasksRequest,
                               SubscribeToTaskRequest, TaskState)
from a2a.utils.errors import TaskNotCancelableError

from tests.e2e.conftest import (CLOSE, NO_BODY_WARNING, child_env, free_port, head_as_get,
                                kill_group, spawn, wait_served)
from tests.e2e.hub_process import PREFIX, WAIT, HubProcess
from tests.e2e.sdk_util import collect, kind, message, sdk_client
from tests.e2e.sdk_util import run as run_within

pytestmark = pytest.mark.e2e

KEY = "mhk_e2e-acme-key"
S = TaskState


def hub_yaml(port: int) -> dict:
    return {
        "public_url": f"http://127.0.0.1:{port}",
        "drain_timeout_secs": 1,
        "tenants": {"acme": {
            "api_keys": [hashlib.sha256(KEY.encode()).hexdigest()],
            "agents": {
                "echo": {"agent": "demo", "publish": True, "description": "echo",
                         "version": "1.0.0",
                         "skills": [{"id": "echo", "name": "Echo", "description": "Echoes."}]},
                "upper": {"agent": {"process": [sys.executable, "examples/harness_upper.py"]},
                          "publish": True, "description": "upper"},
            }}},
    }


def hub_process(directory, config_for=hub_yaml) -> HubProcess:
    """A hub serving ``config_for(port)``, waited for until the echo agent's card is served."""
    return HubProcess(directory, config_for, agent="echo", key=KEY)


@pytest.fixture(scope="module")
def hub_server(tmp_path_factory):
    server = hub_process(tmp_path_factory.mktemp("hub"))
    yield server
    server.stop_soon()


def run(coro):
    return run_within(coro, WAIT)


def sdk(server, agent="echo", *, streaming=False, polling=False):
    """An SDK client of ``agent``, presenting the tenant's key on every request."""
    return sdk_client(f"{server.url}{PREFIX}{agent}", wait=WAIT, headers={"X-API-Key": KEY},
                      streaming=streaming, polling=polling)


def usage_of(artifact) -> dict:
    from google.protobuf.json_format import MessageToDict
    return MessageToDict(artifact.parts[-1].data)["usage"]


def test_sdk_card_blocking_get_and_list(hub_server):
    context = f"ctx-{uuid.uuid4().hex[:8]}"

    async def scenario():
        async with sdk(hub_server) as client:
            card = client._card
            (sent,) = await collect(client.send_message(message("hello, hub", context)))
            (second,) = await collect(client.send_message(message("again", context)))
            got = await client.get_task(GetTaskRequest(id=sent.task.id))
            listed = await client.list_tasks(ListTasksRequest(context_id=context))
            return card, sent.task, second.task, got, listed

    card, task, second, got, listed = run(scenario())
    assert card.supported_interfaces[0].url == f"{hub_server.url}{PREFIX}echo"
    assert card.security_schemes["apiKey"].api_key_security_scheme.name == "X-API-Key"
    assert [s.id for s in card.skills] == ["echo"]
    assert task.status.state == S.TASK_STATE_COMPLETED
    assert task.artifacts[0].artifact_id == "answer"
    assert task.artifacts[0].parts[0].text == "hello, hub"
    assert usage_of(task.artifacts[0])["pricing_status"] == "priced"
    assert got == task
    assert [t.id for t in listed.tasks] == [second.id, task.id] and listed.total_size == 2


def test_sdk_streaming_send(hub_server):
    async def scenario():
        async with sdk(hub_server, streaming=True) as client:
            return await collect(client.send_message(message("/stream 3")))

    events = run(scenario())
    kinds = [kind(e) for e in events]
    assert kinds[0] == "task" and events[0].task.status.state == S.TASK_STATE_SUBMITTED
    assert kinds[1] == "status_update"
    assert events[1].status_update.status.state == S.TASK_STATE_WORKING
    chunks = [e.artifact_update for e in events if kind(e) == "artifact_update"]
    assert [c.artifact.parts[0].text for c in chunks[:3]] == ["chunk 1", "chunk 2", "chunk 3"]
    assert [c.append for c in chunks[:3]] == [False, True, True]
    # The demo answers the chunks joined by newlines: the last chunk replaces them.
    assert not chunks[-1].append and chunks[-1].last_chunk
    assert chunks[-1].artifact.parts[0].text == "chunk 1\nchunk 2\nchunk 3"
    assert events[-1].status_update.status.state == S.TASK_STATE_COMPLETED


def test_sdk_subscribe_and_cancel(hub_server):
    async def scenario():
        async with sdk(hub_server, polling=True) as poller, \
                sdk(hub_server, streaming=True) as streamer:
            (event,) = await collect(poller.send_message(message("/sleep 30")))
            task = event.task
            seen = []
            async for update in streamer.subscribe(SubscribeToTaskRequest(id=task.id)):
                seen.append(update)
                if len(seen) == 2:              # the Task as created, then WORKING
                    canceled = await poller.cancel_task(CancelTaskRequest(id=task.id))
            with pytest.raises(TaskNotCancelableError):
                await poller.cancel_task(CancelTaskRequest(id=task.id))
            (done,) = await collect(poller.send_message(message("quick")))
            replay = await collect(streamer.subscribe(SubscribeToTaskRequest(id=done.task.id)))
            return task, seen, canceled, replay

    task, seen, canceled, replay = run(scenario())
    assert task.status.state == S.TASK_STATE_SUBMITTED
    assert kind(seen[0]) == "task"
    assert seen[-1].status_update.status.state == S.TASK_STATE_CANCELED
    assert canceled.status.state == S.TASK_STATE_CANCELED
    assert kind(replay[0]) == "task" and replay[-1].status_update.status.state == \
        S.TASK_STATE_COMPLETED


def test_process_harness_behind_the_hub(hub_server):
    async def scenario():
        async with sdk(hub_server, "upper") as client:
            return await collect(client.send_message(message("shout this")))

    (event,) = run(scenario())
    assert event.task.artifacts[0].parts[0].text == "SHOUT THIS"


def test_head_is_gets_head_and_logs_nothing(hub_server):
    # NOTE: before, each HEAD logged gunicorn's warning "WSGI app sent body bytes on a
    # no-body response": a line per request anyone could send, before any credential.
    agent = hub_server.card_url().rsplit("/.well-known", 1)[0]
    for url, headers in ((agent, {"X-API-Key": KEY}), (agent, {}),
                         (hub_server.card_url(), {"X-API-Key": KEY}),
                         (hub_server.url + "/nowhere", {})):
        head, get = head_as_get(url, hub_server.card_url(), headers)
        assert (head.status_code, head.content) == (get.status_code, b"")
        assert head.headers["Content-Length"] == str(len(get.content))
    assert NO_BODY_WARNING not in hub_server.log()


def test_anonymous_card_is_401(hub_server):
    response = requests.get(hub_server.card_url("echo"), headers=CLOSE, timeout=WAIT)
    assert response.status_code == 401 and response.json() == {"error": "unauthenticated"}
    assert response.headers["Cache-Control"] == "private, no-store"
    assert response.headers["Vary"] == "Authorization, X-API-Key, X-Tenant-ID"
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="murmur-hub"'


def test_a_blocking_client_that_leaves_cancels_the_run(hub_server):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": f"m-{uuid.uuid4().hex}", "role": "ROLE_USER",
                    "parts": [{"text": "/sleep 30"}]}}}).encode()
    with socket.create_connection(("127.0.0.1", hub_server.port), timeout=WAIT) as sock:
        sock.sendall(b"POST /a2a/v1/agents/echo HTTP/1.1\r\nHost: x\r\n"
                     b"X-API-Key: " + KEY.encode() + b"\r\nA2A-Version: 1.0\r\n"
                     b"Content-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        deadline = time.monotonic() + WAIT

        def newest():
            return hub_server.rpc("ListTasks", {"pageSize": 1}).json()["result"][
                "tasks"][0]

        while newest()["status"]["state"] != "TASK_STATE_WORKING":
            assert time.monotonic() < deadline
        task_id = newest()["id"]
    while newest()["status"]["state"] != "TASK_STATE_CANCELED":
        assert time.monotonic() < deadline, newest()
    assert newest()["id"] == task_id


def test_sigterm_drains_runs_and_ends_streams(tmp_path):
    # PERF: the run in flight (30 s) outlasts any drain: a short one ends it FAILED sooner.
    server = hub_process(tmp_path, lambda port: {**hub_yaml(port), "drain_timeout_secs": 0.2})
    try:
        task = server.rpc("SendMessage", {
            "message": {"messageId": "bg", "role": "ROLE_USER", "parts": [{"text": "/sleep 30"}]},
            "configuration": {"returnImmediately": True}}).json()["result"]["task"]
        stream = server.rpc("SubscribeToTask", {"id": task["id"]}, stream=True)
        lines = stream.iter_lines()
        assert b"TASK_STATE_SUBMITTED" in next(line for line in lines if line)
        took = server.stop()
        rest = [line for line in lines if line.startswith(b"data: ")]
        final = json.loads(rest[-1][6:])["result"]["statusUpdate"]["status"]
        assert final["state"] == "TASK_STATE_FAILED"
        assert final["message"]["parts"][0]["text"] == (
            "interrupted: the hub shut down before the run ended")
        assert took < 15, took
    finally:
        server.stop()


def test_dev_server(tmp_path):
    port = free_port()
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump(hub_yaml(port)), encoding="utf-8")
    proc = spawn([sys.executable, "-m", "murmur_wsgi.cli", "hub", "--dev", "--config", str(path),
                  "--listen", f"127.0.0.1:{port}"], tmp_path / "dev.log", child_env())
    try:
        url = f"http://127.0.0.1:{port}{PREFIX}echo"
        wait_served(proc, url + "/.well-known/agent-card.json", time.monotonic() + WAIT,
                    "the dev hub", (tmp_path / "dev.log").read_text, {"X-API-Key": KEY})
        answer = requests.post(url, headers={**CLOSE, "X-API-Key": KEY, "A2A-Version": "1.0"},
                               json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                                     "params": {"message": {"messageId": "d1", "role": "ROLE_USER",
                                                            "parts": [{"text": "dev"}]}}},
                               timeout=WAIT).json()
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        proc.terminate()
        assert proc.wait(timeout=WAIT) == 0
    finally:
        if proc.poll() is None:
            kill_group(proc)
            proc.wait(timeout=10)


def test_bad_config_exits_2_before_listening(tmp_path):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"public_url": "https://h.io/path"}), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "murmur_wsgi.cli", "hub", "--config", str(path)],
                          capture_output=True, text=True, timeout=WAIT, env=child_env())
    assert done.returncode == 2
    assert done.stderr == (f"murmur-wsgi: {path}: public_url: 'https://h.io/path' must be a "
                           "host only: no path, query or fragment\n")
