"""Two hub replicas (two gunicorn masters, one of them with two workers) on one Redis, and
again on a 3-primary Redis Cluster (``store: redis-cluster://…``): every check runs on both.
On the cluster the keys of the tenants ``acme`` and ``capped`` and the hub's own are on
three different primaries.

Send on A, then GetTask, ListTasks and SubscribeToTask on B; cancel from B; one
run for a messageId raced on A and B; SIGKILL A mid-run: B's sweep ends the
task FAILED and B's subscriber gets the final event; replicas restarted: the
tasks are still there. Short liveness and sweep settings keep it fast.

Push is on (a local HTTPS receiver, the test-only ``push.allow_networks`` and
``push.ca_file``): the run on A that dies with A still notifies its FAILED, sent by B.
"""
from __future__ import annotations

import re
import threading
import time
import uuid

import jwt
import pytest
import requests

from murmur_wsgi.hub.store.redis_keys import HUB, tenant_prefix

from tests.e2e.conftest import CLOSE
from tests.e2e.hub_process import start_together, together
from tests.e2e.hub_replicas import (CAPPED_KEY, SECRET, WAIT, Replica, Subscriber, final_state,
                                    send, state, task_of, until)
from tests.hub.push_util import SECRET as PUSH_SECRET
from tests.hub.push_util import Receiver, make_cert, verify

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", params=("redis", "cluster"))
def redis_url(request):
    """The URL of the session's redis-server or of its Redis Cluster (tests/conftest.py),
    flushed; on the cluster, the tenants' keys and the hub's are on three primaries, so
    every step crosses nodes."""
    server = request.getfixturevalue("redis_server" if request.param == "redis"
                                     else "redis_cluster")
    server.flush()
    if request.param == "cluster":
        client = server.client()
        try:
            assert len({client.get_node_from_key(tag).name for tag in (
                HUB, tenant_prefix("acme"), tenant_prefix("capped"))}) == 3
        finally:
            client.close()
    return server.url


@pytest.fixture(scope="module")
def receiver(tmp_path_factory, redis_url):
    """The push receiver of one Redis's replicas (each Redis its own: what it got is theirs)."""
    cert_file, key_file = make_cert(tmp_path_factory.mktemp("replicas-cert"))
    r = Receiver(cert_file, key_file)
    r.settings = {"push": {"enabled": True, "secret": PUSH_SECRET, "ports": [r.port],
                           "allow_networks": ["127.0.0.0/8"], "ca_file": cert_file}}
    yield r
    r.close()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory, redis_url, receiver):
    directory = tmp_path_factory.mktemp("replicas")
    a, b = start_together(lambda: Replica(directory, redis_url, **receiver.settings),
                          lambda: Replica(directory, redis_url, workers=2, **receiver.settings))
    yield a, b, directory
    a.stop_soon()
    b.stop_soon()


def test_send_on_a_read_list_and_follow_on_b(replicas):
    a, b, _ = replicas
    task = send(a, "0.5")
    sub = Subscriber(b, task["id"])
    assert until(lambda: state(b, task["id"]) == "TASK_STATE_COMPLETED")
    assert final_state(sub.final()) == "TASK_STATE_COMPLETED"
    kinds = [next(iter(e["result"])) for e in sub.events]
    assert kinds[0] == "task" and "artifactUpdate" in kinds
    listed = b.result("ListTasks", {"pageSize": 100})
    assert task["id"] in [t["id"] for t in listed["tasks"]]
    assert a.result("GetTask", {"id": task["id"]}) == b.result("GetTask", {"id": task["id"]})


def test_cancel_from_b(replicas):
    a, b, _ = replicas
    task = send(a, "30")
    until(lambda: state(b, task["id"]) == "TASK_STATE_WORKING")
    sub = Subscriber(b, task["id"])
    canceled = b.result("CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert final_state(sub.final()) == "TASK_STATE_CANCELED"
    assert state(a, task["id"]) == "TASK_STATE_CANCELED"


def test_one_run_for_a_message_id_raced_on_a_and_b(replicas):
    a, b, _ = replicas
    message_id = uuid.uuid4().hex
    answers: list = [None, None]
    barrier = threading.Barrier(2)

    def race(i, replica):
        barrier.wait(5)
        answers[i] = replica.rpc("SendMessage", {
            "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "0.3"}]},
            "configuration": {"returnImmediately": True}}).json()

    threads = [threading.Thread(target=race, args=(i, r)) for i, r in enumerate((a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    ids = {task_of(ans["result"])["id"] for ans in answers if "result" in ans}
    codes = [ans["error"]["code"] for ans in answers if "error" in ans]
    assert len(ids) == 1 and codes in ([], [-32600]), answers
    task_id = ids.pop()
    until(lambda: state(b, task_id) == "TASK_STATE_COMPLETED")
    listed = b.result("ListTasks", {"pageSize": 100})["tasks"]
    assert sum(1 for t in listed if t["history"][0]["messageId"] == message_id) == 1


def test_metrics_add_up_every_worker(replicas):
    _, b, _ = replicas                      # B: two workers
    operator = jwt.encode({"sub": "ops", "role": "operator", "exp": int(time.time()) + 300},
                          SECRET, algorithm="HS256")

    def get_tasks() -> int:
        page = requests.get(f"{b.url}/metrics", timeout=WAIT,
                            headers={**CLOSE, "Authorization": f"Bearer {operator}"})
        assert page.status_code == 200, page.text
        found = re.search(r'^murmur_hub_requests_total\{method="GetTask"\} (\S+)$', page.text,
                          re.M)
        return int(float(found.group(1))) if found else 0

    before = get_tasks()
    for _ in range(20):
        b.rpc("GetTask", {"id": "no-such-task"})
    # Each page, whichever worker answers it, counts the requests of both.
    assert [get_tasks() for _ in range(6)] == [before + 20] * 6
    assert requests.get(f"{b.url}/metrics", headers=CLOSE, timeout=WAIT).status_code == 401


def test_the_concurrency_bound_holds_across_replicas_and_workers(replicas):
    a, b, _ = replicas                  # B: two workers; tenant "capped": 2 runs at once
    held = [send(a, "30", key=CAPPED_KEY), send(b, "30", key=CAPPED_KEY)]
    assert [t["status"]["state"] for t in held] == ["TASK_STATE_SUBMITTED"] * 2
    for replica in (a, b, b):
        status = send(replica, "30", key=CAPPED_KEY)["status"]
        assert status["state"] == "TASK_STATE_REJECTED"
        assert status["message"]["parts"][0]["text"] == \
            "concurrency limit reached: 2 runs at once for this tenant"
    # A run canceled from the other replica frees its slot with its end.
    canceled = b.result("CancelTask", {"id": held[0]["id"]}, CAPPED_KEY)
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    again = send(b, "30", key=CAPPED_KEY)
    assert again["status"]["state"] == "TASK_STATE_SUBMITTED"
    for task in (held[1], again):
        assert b.result("CancelTask", {"id": task["id"]}, CAPPED_KEY)["status"]["state"] == \
            "TASK_STATE_CANCELED"


def notified(receiver, path: str) -> list:
    """What the receiver got on ``path``, in arrival order."""
    return [r for r in list(receiver.requests) if r.path == path]


def body_state(received) -> str:
    body = received.json
    return (body.get("task") or body["statusUpdate"])["status"]["state"]


def test_sigkill_a_mid_run_b_sweeps_and_restart_keeps_the_tasks(replicas, redis_url, receiver):
    a, b, directory = replicas
    done = send(a, "0.1")
    until(lambda: state(b, done["id"]) == "TASK_STATE_COMPLETED")
    config = {"id": "kill", "url": receiver.url(path="/e2e/kill"), "token": "tk-kill"}
    task = send(a, "60", push=config)
    until(lambda: state(b, task["id"]) == "TASK_STATE_WORKING")
    until(lambda: len(notified(receiver, "/e2e/kill")) >= 2)     # SUBMITTED, WORKING
    sub = Subscriber(b, task["id"])
    a.kill()
    last = sub.final(timeout=WAIT)
    assert final_state(last) == "TASK_STATE_FAILED"
    got = b.result("GetTask", {"id": task["id"]})
    assert got["status"]["state"] == "TASK_STATE_FAILED"
    assert "interrupted" in got["status"]["message"]["parts"][0]["text"]
    # The sweep's final event is notified by B (A is gone): its JWT's iss is B's public_url.
    until(lambda: "TASK_STATE_FAILED" in map(body_state, notified(receiver, "/e2e/kill")))
    key = b.result("CreateTaskPushNotificationConfig",
                   {"taskId": task["id"], **config})["authentication"]["credentials"]
    by_jti: dict = {}
    for received in notified(receiver, "/e2e/kill"):
        claims = verify(received, key, config["url"], token="tk-kill", issuer=None)
        assert claims["iss"] in (a.url, b.url)
        assert by_jti.setdefault(claims["jti"], received.body) == received.body   # dupes same
        if body_state(received) == "TASK_STATE_FAILED":
            assert claims["iss"] == b.url
            final = received.json["task"]
            assert "interrupted" in final["status"]["message"]["parts"][0]["text"]
            assert "history" not in final
    assert [body_state(r) for r in notified(receiver, "/e2e/kill")
            if by_jti.pop(verify(r, key, config["url"], issuer=None)["jti"], None)] == \
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_FAILED"]   # deduped by jti
    # Both replicas restarted (A on its port): every task is still there.
    # PERF: B's new process starts on a port of its own while B stops (gunicorn's second
    # or so), as A's on A's.
    replicas_now: list = []

    def restart():
        replicas_now.extend(start_together(
            lambda: Replica(directory, redis_url, port=a.port, **receiver.settings),
            lambda: Replica(directory, redis_url, **receiver.settings)))

    try:
        together(b.stop, restart)
    except BaseException:
        for replica in replicas_now:
            replica.kill()
        raise
    a2, b2 = replicas_now
    try:
        for replica in replicas_now:
            assert state(replica, done["id"]) == "TASK_STATE_COMPLETED"
            assert state(replica, task["id"]) == "TASK_STATE_FAILED"
    finally:
        for replica in replicas_now:
            replica.stop_soon()
    a.proc, b.proc = a2.proc, b2.proc          # the fixture's stop_soon() finds them sent
