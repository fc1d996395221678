"""The README's ``murmur-wsgi serve``, driven over real HTTP under gunicorn -k gevent."""
from __future__ import annotations

import asyncio
import http.client
import json
import shutil
import signal
import subprocess
import sys
import time

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types.a2a_pb2 import GetTaskRequest
from a2a.utils.errors import TaskNotFoundError
from werkzeug.test import Client

from murmur_wsgi import create_app, gunicorn_conf
from murmur_wsgi.uris import CARD_PATH

from tests.e2e.conftest import (NO_BODY_WARNING, REPO, child_env, default_manifest, free_port,
                                head_as_get, http_get, http_post, kill_group, serve_argv,
                                start_door, write_manifest)

pytestmark = pytest.mark.e2e

V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def post(door, body, headers=V1):
    return http_post(door.url + "/", json.dumps(body), headers)


# --- the card --------------------------------------------------------------------------


def test_card_over_http_is_the_test_clients_card(door_server):
    served = http_get(door_server.card_url)
    local_door = create_app(str(door_server.manifest_path),
                            listen=f"127.0.0.1:{door_server.port}")
    try:
        local = Client(local_door).get(CARD_PATH)
    finally:
        local_door.close()

    assert served.status_code == local.status_code == 200
    for name in ("Content-Type", "Cache-Control", "Content-Length"):
        assert served.headers[name] == local.headers[name], name
    # Byte for byte, key order included, once the two sessions' ids are swapped.
    assert served.content.replace(door_server.session_id.encode(),
                                  local_door.session.id.encode()) == local.data


def test_card_names_the_listener_as_localhost(door_server):
    card = door_server.card
    assert card["supportedInterfaces"] == [{"url": f"http://localhost:{door_server.port}",
                                            "protocolBinding": "JSONRPC",
                                            "protocolVersion": "1.0"}]
    assert door_server.session_id.startswith("ses_")


def test_sdk_resolves_the_card(door_server):
    async def resolve():
        async with httpx.AsyncClient(timeout=10) as http:
            return await A2ACardResolver(http, door_server.url).get_agent_card()

    card = asyncio.run(resolve())
    assert card.name == "my-agent"
    assert card.version == "0.1.0"
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] \
        == [(f"http://localhost:{door_server.port}", "JSONRPC", "1.0")]
    assert card.capabilities.streaming is True


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_reads_the_card(door_server):
    done = subprocess.run(["curl", "-s", "-f", "--max-time", "10", door_server.card_url],
                          capture_output=True, timeout=20, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == door_server.card


# --- JSON-RPC ------------------------------------------------------------------------


def test_head_is_gets_head_and_logs_nothing(door_server):
    # NOTE: before, each HEAD but the card's logged gunicorn's warning "WSGI app sent body
    # bytes on a no-body response": a line per request a client chose to send.
    for url in (door_server.url + "/", door_server.url + "/nowhere"):
        head, get = head_as_get(url, door_server.card_url, V1)
        assert (head.status_code, head.content) == (get.status_code, b"")
        assert head.headers["Content-Length"] == str(len(get.content))
        assert head.headers["Content-Type"] == get.headers["Content-Type"]
    assert NO_BODY_WARNING not in door_server.log()


def test_unknown_task_is_32001(door_server):
    response = post(door_server, {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                  "params": {"id": "tsk_x"}})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.text == _compact({"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32001, "message": "Task not found", "data": [{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND",
            "domain": "a2a-protocol.org", "metadata": {"taskId": "tsk_x"}}]}})


def test_sdk_client_reads_32001_as_task_not_found(door_server):
    async def get_task():
        async with httpx.AsyncClient(timeout=10) as http:
            card = await A2ACardResolver(http, door_server.url).get_agent_card()
        client = await create_client(card, ClientConfig(streaming=False))
        async with client:
            await client.get_task(GetTaskRequest(id="tsk_x"))

    with pytest.raises(TaskNotFoundError):
        asyncio.run(get_task())


def version_refusal(requested: str) -> str:
    return _compact({"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32009,
        "message": f"A2A version '{requested}' is not supported; this agent speaks 1.0",
        "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                  "reason": "VERSION_NOT_SUPPORTED", "domain": "a2a-protocol.org",
                  "metadata": {"requestedVersion": requested, "supportedVersions": "1.0"}}]}})


def test_no_version_header_is_32009(door_server):
    response = post(door_server, {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                  "params": {"id": "tsk_x"}},
                    headers={"Content-Type": "application/json"})
    assert response.status_code == 200
    assert response.text == version_refusal("")


def test_two_version_lines_are_32009_joined(door_server):
    """gunicorn joins repeated header lines with ','; the door reports them as sent."""
    conn = http.client.HTTPConnection("127.0.0.1", door_server.port, timeout=10)
    try:
        body = _compact({"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                         "params": {"id": "tsk_x"}}).encode()
        conn.putrequest("POST", "/")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("A2A-Version", "1.0")
        conn.putheader("A2A-Version", "1.0")
        conn.putheader("Content-Length", str(len(body)))
        conn.putheader("Connection", "close")
        conn.endheaders(body)
        response = conn.getresponse()
        text = response.read().decode()
    finally:
        conn.close()
    assert response.status == 200
    assert text == version_refusal("1.0,1.0")


# --- the process -----------------------------------------------------------------------


@pytest.mark.parametrize("manifest, line", [
    pytest.param({"name": "x"}, "version: is required", id="missing-key"),
    pytest.param({"name": "x", "version": "1", "colour": "red"},
                 "colour: is not a key this door reads", id="unknown-key"),
    pytest.param("name: [x\n", "is not valid YAML at line 2", id="bad-yaml"),
])
def test_bad_manifest_exits_2_with_one_line(tmp_path, manifest, line):
    if isinstance(manifest, str):
        path = tmp_path / "murmur.yaml"
        path.write_text(manifest, encoding="utf-8")
    else:
        path = write_manifest(tmp_path, manifest)
    done = subprocess.run(serve_argv(path, f"127.0.0.1:{free_port()}"), cwd=REPO,
                          env=child_env(), capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"murmur-wsgi: {path}: {line}\n"


def test_two_workers_are_refused(tmp_path):
    path = write_manifest(tmp_path, default_manifest())
    argv = [sys.executable, "-m", "gunicorn", "-c", "conf/gunicorn.conf.py", "-w", "2",
            "-b", f"127.0.0.1:{free_port()}", "murmur_wsgi.door.wsgi:app"]
    done = subprocess.run(argv, cwd=REPO, env=child_env(MURMUR_WSGI_CONFIG=str(path)),
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode != 0
    assert ("murmur-wsgi: the session lives in one process; run gunicorn with workers = 1 "
            "(got 2)") in done.stderr.splitlines()
    assert "Booting worker" not in done.stderr


def worker_pids(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
        return [int(p) for p in fh.read().split()]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigttin_keeps_one_worker(tmp_path):
    with start_door(tmp_path) as door:
        # `murmur-wsgi serve` execs gunicorn: the process started is the arbiter.
        before = worker_pids(door.proc.pid)
        assert len(before) == 1
        door.proc.send_signal(signal.SIGTTIN)
        wait_for_log(door, "staying at 1 worker")
        assert worker_pids(door.proc.pid) == before
        first = door.session_id
        assert http_get(door.card_url).json() == door.card
        assert first == door.session_id


def wait_for_log(door, text: str, timeout: float = 10.0) -> None:
    """Wait for ``text`` in the server's log, paced on the process, up to ``timeout``."""
    deadline = timeout
    while text not in door.log():
        assert door.proc.poll() is None, door.log()
        assert deadline > 0, f"{text!r} not logged within {timeout}s:\n{door.log()}"
        try:
            door.proc.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            deadline -= 0.05


def test_sigterm_stops_within_graceful_timeout(tmp_path):
    with start_door(tmp_path) as door:
        assert post(door, {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                           "params": {"id": "tsk_x"}}).status_code == 200
        seconds = door.stop(timeout=gunicorn_conf.graceful_timeout + 5)
    assert seconds < gunicorn_conf.graceful_timeout
    assert door.proc.returncode == 0
    assert "Shutting down: Master" in door.log()


def test_running_record_names_the_master_until_sigterm(tmp_path):
    with start_door(tmp_path) as door:
        path = door.home / "running" / f"{door.session_id}.json"
        record = json.loads(path.read_text(encoding="utf-8"))
        # `murmur-wsgi serve` execs gunicorn: the pid it records is the master's.
        assert (record["session_id"], record["pid"], record["url"]) == \
            (door.session_id, door.proc.pid, f"127.0.0.1:{door.port}")
        door.stop()
    assert not path.exists()


TWO_WORKERS = "test_two_workers_are_refused_without_the_doors_conf_too"


@pytest.fixture(scope="module", autouse=True)
def two_workers_without_the_conf(request, tmp_path_factory):
    """``gunicorn -k gevent -w 2`` on the door's wsgi module without its conf, started as the
    module's tests begin (when TWO_WORKERS is among the tests run): its second worker waits
    8 s for the one-worker lock (murmur_wsgi/door/wsgi.py's TAKEOVER_SECS) before it gives
    up, and the module's other tests run meanwhile: the test is the module's last.
    (process, its stderr's file, deadline)"""
    if not any(item.name == TWO_WORKERS for item in request.session.items):
        yield None
        return
    directory = tmp_path_factory.mktemp("two-workers")
    path = write_manifest(directory, default_manifest())
    argv = [sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", "2",
            "-b", f"127.0.0.1:{free_port()}", "murmur_wsgi.door.wsgi:app"]
    stderr = directory / "gunicorn.log"
    with open(stderr, "wb") as log:
        proc = subprocess.Popen(argv, cwd=REPO, env=child_env(MURMUR_WSGI_CONFIG=str(path),
                                                              MURMUR_WSGI_HOME=str(directory)),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=log, start_new_session=True)
    yield proc, stderr, time.monotonic() + 60
    if proc.poll() is None:                     # the test was not run, or failed waiting
        kill_group(proc)
        proc.wait(timeout=10)


def test_two_workers_are_refused_without_the_doors_conf_too(two_workers_without_the_conf):
    proc, stderr, deadline = two_workers_without_the_conf
    returncode = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    assert returncode != 0
    assert "another worker of this gunicorn master already serves the session" in \
        stderr.read_text()
    assert "Worker failed to boot" in stderr.read_text()
