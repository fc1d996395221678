"""Push from a real hub process (gunicorn -k gevent) to a local HTTPS receiver.

The receiver runs in this process on 127.0.0.1 with a certificate the test
made; the hub reaches it only through the test-only ``push.allow_networks``
and ``push.ca_file``. The hub's retry waits are real waits here, scaled by the
test-only ``push.retry_scale`` (0.01: 10, 20 and 40 ms instead of 1, 2 and 4 s), so
real 5xx answers prove the retry path and the disabling under gunicorn in well
under a second.
"""
from __future__ import annotations

import hashlib
import json
import time

import pytest

from tests.e2e.hub_process import WAIT, HubProcess
from tests.hub.push_util import SECRET, Receiver, make_cert, stream_response, verify

pytestmark = pytest.mark.e2e

SCALE = 0.01                     # push.retry_scale: retry waits of 10, 20 and 40 ms
KEY = "mhk_e2e-push-key"


def wait_until(predicate, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.02)  # wait-ok: polling a real process with a deadline


def push_yaml(receiver, port: int) -> dict:
    """Push on, reaching only the local receiver (its port, 127.0.0.0/8, its certificate)."""
    agents = {name: {"agent": ref, "publish": True} for name, ref in (
        ("tokens", "tests.hub.agents:tokens"), ("steps", "tests.hub.push_agents:steps"))}
    return {"public_url": f"http://127.0.0.1:{port}", "drain_timeout_secs": 1,
            "push": {"enabled": True, "ports": [443, receiver.port],
                     "allow_networks": ["127.0.0.0/8"], "ca_file": receiver.cert_file,
                     "retry_scale": SCALE},
            "tenants": {"acme": {"api_keys": [hashlib.sha256(KEY.encode()).hexdigest()],
                                 "agents": agents}}}


@pytest.fixture(scope="module")
def receiver(tmp_path_factory):
    cert_file, key_file = make_cert(tmp_path_factory.mktemp("push-e2e-cert"))
    r = Receiver(cert_file, key_file)
    r.cert_file = cert_file
    yield r
    r.close()


@pytest.fixture(scope="module")
def hub(tmp_path_factory, receiver):
    server = HubProcess(tmp_path_factory.mktemp("push-hub"),
                        lambda port: push_yaml(receiver, port), agent="tokens", key=KEY,
                        env={"MURMUR_HUB_PUSH_SECRET": SECRET})
    yield server
    server.stop_soon()


def message(text, config):
    return {"message": {"messageId": f"m-{time.monotonic_ns()}", "role": "ROLE_USER",
                        "parts": [{"text": text}]},
            "configuration": {"taskPushNotificationConfig": config}}


def status(hub, agent, task_id, config_id):
    return hub.result("GetTaskPushNotificationConfig", {"taskId": task_id, "id": config_id},
                      agent=agent)["deliveryStatus"]


def key_of(hub, agent, task_id, config):
    return hub.result("CreateTaskPushNotificationConfig", {"taskId": task_id, **config},
                      agent=agent)["authentication"]["credentials"]


def test_every_notification_of_a_streamed_run_verifies(hub, receiver):
    receiver.requests.clear()
    config = {"id": "stream", "url": receiver.url(path="/e2e/stream"), "token": "e2e-token"}
    response = hub.rpc("SendStreamingMessage", message("a b c", config), agent="tokens",
                       stream=True)
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
    task = hub.result("SendMessage", message("x", config), agent="tokens")
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
    task = hub.result("SendMessage", message("4", config), agent="steps")
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
