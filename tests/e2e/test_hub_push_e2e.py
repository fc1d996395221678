"""Push from a real hub process (gunicorn -k gevent) to a local HTTPS receiver.

The receiver runs in this process on 127.0.0.1 with a certificate the test
made; the hub reaches it only through the test-only ``push.allow_networks``
and ``push.ca_file``. The hub's retry waits are real waits here, scaled by the
test-only ``push.retry_scale`` (0.01: 10, 20 and 40 ms instead of 1, 2 and 4 s), so
real 5xx answers prove the retry path and the disabling under gunicorn in well
under a second.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import sys
import time

import pytest
import requests
import yaml

from tests.e2e.conftest import CLOSE, _kill_group, child_env, free_port, spawn
from tests.hub.push_util import SECRET, Receiver, make_cert, stream_response, verify

pytestmark = pytest.mark.e2e

WAIT = 20.0
SCALE = 0.01                     # push.retry_scale: retry waits of 10, 20 and 40 ms
KEY = "mhk_e2e-push-key"
PREFIX = "/a2a/v1/agents/"


def wait_until(predicate, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.02)  # wait-ok: polling a real process with a deadline


class PushHub:
    def __init__(self, directory, receiver):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        agents = {name: {"agent": ref, "publish": True} for name, ref in (
            ("tokens", "tests.hub.agents:tokens"), ("steps", "tests.hub.push_agents:steps"))}
        config = {"public_url": self.url, "drain_timeout_secs": 1,
                  "push": {"enabled": True, "ports": [443, receiver.port],
                           "allow_networks": ["127.0.0.0/8"], "ca_file": receiver.cert_file,
                           "retry_scale": SCALE},
                  "tenants": {"acme": {"api_keys": [hashlib.sha256(KEY.encode()).hexdigest()],
                                       "agents": agents}}}
        path = directory / "hub.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        self.log_path = directory / "hub.log"
        self.proc = spawn([sys.executable, "-m", "murmur_wsgi.cli", "hub", "--config", str(path),
                           "--listen", f"127.0.0.1:{self.port}"], self.log_path,
                          child_env(MURMUR_HUB_PUSH_SECRET=SECRET))
        card = f"{self.url}{PREFIX}tokens/.well-known/agent-card.json"

        def up():
            assert self.proc.poll() is None, self.log()
            with contextlib.suppress(requests.RequestException):
                return requests.get(card, headers={**CLOSE, "X-API-Key": KEY},
                                    timeout=0.5).status_code == 200
            return False
        wait_until(up)

    def rpc(self, agent, method, params, **kwargs):
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return requests.post(f"{self.url}{PREFIX}{agent}", data=json.dumps(body), timeout=WAIT,
                             headers={**CLOSE, "X-API-Key": KEY, "A2A-Version": "1.0",
                                      "Content-Type": "application/json"}, **kwargs)

    def result(self, agent, method, params):
        payload = self.rpc(agent, method, params).json()
        assert "result" in payload, payload
        return payload["result"]

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc)
            raise AssertionError("the hub did not stop:\n" + self.log()) from None


@pytest.fixture(scope="module")
def receiver(tmp_path_factory):
    cert_file, key_file = make_cert(tmp_path_factory.mktemp("push-e2e-cert"))
    r = Receiver(cert_file, key_file)
    r.cert_file = cert_file
    yield r
    r.close()


@pytest.fixture(scope="module")
def hub(tmp_path_factory, receiver):
    server = PushHub(tmp_path_factory.mktemp("push-hub"), receiver)
    yield server
    server.stop()


def message(text, config):
    return {"message": {"messageId": f"m-{time.monotonic_ns()}", "role": "ROLE_USER",
                        "parts": [{"text": text}]},
            "configuration": {"taskPushNotificationConfig": config}}


def status(hub, agent, task_id, config_id):
    return hub.result(agent, "GetTaskPushNotificationConfig",
                      {"taskId": task_id, "id": config_id})["deliveryStatus"]


def key_of(hub, agent, task_id, config):
    return hub.result(agent, "CreateTaskPushNotificationConfig",
                      {"taskId": task_id, **config})["authentication"]["credentials"]


def test_every_notification_of_a_streamed_run_verifies(hub, receiver):
    receiver.requests.clear()
    config = {"id": "stream", "url": receiver.url(path="/e2e/stream"), "token": "e2e-token"}
    response = hub.rpc("tokens", "SendStreamingMessage", message("a b c", config), stream=True)
    lines = [json.loads(line[6:]) for line in response.iter_lines(decode_unicode=True)
             if line.startswith("data: ")]
    task_id = lines[0]["result"]["task"]["id"]
    got = receiver.wait_for(3)
    wait_until(lambda: status(hub, "tokens", task_id, "stream") == {"failures": 0,
                                                                    "disabled": False})
    key = key_of(hub, "tokens", task_id, config)
    jtis = set()
    for received in got:
        claims = verify(received, key, config["url"], token="e2e-token", issuer=hub.url)
        assert claims["exp"] == claims["iat"] + 300
        assert claims["exp"] > time.time()
        jtis.add(claims["jti"])
        stream_response(received)
    assert len(jtis) == 3                                   # dedupe by jti: all distinct
    states = [(r.json.get("task") or r.json["statusUpdate"])["status"]["state"] for r in got]
    assert states == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]


def test_a_503_is_retried_with_the_same_jti(hub, receiver):
    receiver.requests.clear()
    receiver.script[:] = [503]
    config = {"id": "retry", "url": receiver.url(path="/e2e/retry")}
    task = hub.result("tokens", "SendMessage", message("x", config))
    task = task.get("task", task)
    got = receiver.wait_for(4)
    wait_until(lambda: status(hub, "tokens", task["id"], "retry")["failures"] == 0
               and len(receiver.requests) == 4)
    key = key_of(hub, "tokens", task["id"], config)
    assert got[0].body == got[1].body
    first, retry = (verify(r, key, config["url"], issuer=hub.url) for r in got[:2])
    assert first["jti"] == retry["jti"]


def test_a_redirect_is_final_and_five_failures_disable(hub, receiver):
    receiver.requests.clear()
    receiver.script[:] = [302] + [500] * 16            # 1 final answer, then 4 events x 4
    config = {"id": "bad", "url": receiver.url(path="/e2e/bad")}
    task = hub.result("steps", "SendMessage", message("4", config))
    task = task.get("task", task)
    wait_until(lambda: status(hub, "steps", task["id"], "bad")["disabled"])
    found = status(hub, "steps", task["id"], "bad")
    assert found["failures"] == 5 and found["lastError"] == "HTTP 500"
    assert "disabledAt" in found
    got = list(receiver.requests)
    assert [r.path for r in got] == ["/e2e/bad"] * 17   # no redirect followed, then disabled
    key = key_of(hub, "steps", task["id"], config)
    jtis = [verify(r, key, config["url"], issuer=hub.url)["jti"] for r in got]
    assert len(set(jtis)) == 5
    for event in range(4):                             # each 500: retried 3 times, same jti
        tries = got[1 + 4 * event:5 + 4 * event]
        assert len(set(jtis[1 + 4 * event:5 + 4 * event])) == 1
        gaps = [b.at - a.at for a, b in zip(tries, tries[1:])]
        assert all(gap >= 0.9 * SCALE * wait for gap, wait in zip(gaps, (1, 2, 4))), gaps
