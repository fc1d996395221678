"""What push sends and how, from a hub on the memory store and on Redis: a real HTTPS
receiver on 127.0.0.1 (a certificate the test made, push.allow_networks for loopback: a
test-only switch), retry waits recorded."""
from __future__ import annotations

import logging
import threading
import time

import pytest

from murmur_wsgi.hub.push.delivery import RETRY_DELAYS, Sender
from murmur_wsgi.hub.push.dispatcher import Dispatcher
from murmur_wsgi.hub.push.egress import Egress
from murmur_wsgi.hub.store.push_base import MAX_FAILURES, PushRecord
from tests.hub.agents import gate
from tests.hub.conftest import send_params, sse_events, wait_until
from tests.hub.push_util import (SECRET, cert, create, phub, prpc, receiver,  # noqa: F401
                                 status_of, stream_response, verify)

COMPLETED = "TASK_STATE_COMPLETED"


def settled(rpc, task_id, config_id, failures=None, disabled=None):
    """Wait until the config's delivery status says so; return it."""
    found = {}

    def check():
        found.update(status_of(rpc, task_id, config_id))
        return (failures is None or found["failures"] == failures) and \
            (disabled is None or found["disabled"] == disabled)
    wait_until(check)
    return found


def streamed_with_config(rpc, receiver, text="one two three", agent="tokens", token="tk-1",
                         config_id="c1"):
    config = {"id": config_id, "url": receiver.url(), "token": token}
    response = rpc.call("SendStreamingMessage", send_params(
        text, configuration={"taskPushNotificationConfig": config}), agent=agent)
    events = sse_events(response)
    task_id = events[0]["result"]["task"]["id"]
    key = create(rpc, task_id, receiver.url(), id=config_id, token=token,
                 **({} if token is None else {}))["authentication"]["credentials"]
    return task_id, key, events


def test_a_streamed_run_notifies_submitted_working_and_the_final_task(prpc, receiver):
    prpc.agent = "tokens"
    config = {"id": "c1", "url": receiver.url(), "token": "tk-1"}
    response = prpc.call("SendStreamingMessage", send_params(
        "one two three", configuration={"taskPushNotificationConfig": config}))
    events = sse_events(response)
    task_id = events[0]["result"]["task"]["id"]
    got = receiver.wait_for(3)
    # NOTE: Create with the same id and url returns the key; it replaces the config, after
    # the run's three events were delivered, so nothing more is sent.
    settled(prpc, task_id, "c1")
    wait_until(lambda: prpc.hub.push.dispatcher.idle())
    key = create(prpc, task_id, receiver.url(), id="c1", token="tk-1")
    key = key["authentication"]["credentials"]
    bodies = [r.json for r in got]
    assert bodies[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert bodies[0]["task"]["history"][0]["parts"] == [{"text": "one two three"}]
    assert bodies[1]["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
    final = bodies[2]["task"]
    assert final["status"]["state"] == COMPLETED and "history" not in final
    assert final["artifacts"][0]["parts"][0]["text"] == "one two three"
    assert "usage" in final["artifacts"][0]["parts"][-1]["data"]
    assert final == {k: v for k, v in prpc.result("GetTask", {"id": task_id}).items()
                     if k != "history"}
    jtis = []
    for seq_index, received in enumerate(got):
        stream_response(received)                        # strict a2a-sdk parse
        assert received.path == "/a2a/hook"
        assert received.headers["Content-Type"] == "application/json"
        assert received.headers["A2A-Notification-Token"] == "tk-1"
        claims = verify(received, key, receiver.url(), token="tk-1")
        assert set(claims) == {"iss", "aud", "iat", "exp", "jti", "taskId", "configId",
                               "bodySha256", "tokenSha256"}
        assert claims["exp"] == claims["iat"] + 300
        assert claims["taskId"] == task_id and claims["configId"] == "c1"
        jtis.append(claims["jti"])
    seqs = [int(j.rsplit("/", 1)[1]) for j in jtis]
    assert all(j.startswith(f"{task_id}/c1/") for j in jtis)
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    assert len(receiver.requests) == 3                   # no artifact chunks
    assert settled(prpc, task_id, "c1") == {"failures": 0, "disabled": False}


def test_no_token_no_token_header_nor_claim(prpc, receiver):
    result = prpc.send("hi", configuration={"taskPushNotificationConfig": {
        "id": "c1", "url": receiver.url()}})
    got = receiver.wait_for(3)
    assert "A2A-Notification-Token" not in got[0].headers
    wait_until(lambda: prpc.hub.push.dispatcher.idle())
    key = create(prpc, result["id"], receiver.url(), id="c1")["authentication"]["credentials"]
    claims = verify(got[0], key, receiver.url())
    assert "tokenSha256" not in claims


def test_only_later_events_are_notified(prpc, receiver):
    prpc.agent = "held"
    task = prpc.send("push-later", configuration={"returnImmediately": True})
    wait_until(lambda: prpc.result("GetTask", {"id": task["id"]})["status"]["state"]
               == "TASK_STATE_WORKING")
    create(prpc, task["id"], receiver.url(), id="late")
    gate("push-later").set()
    got = receiver.wait_for(1)
    assert [r.json["task"]["status"]["state"] for r in got] == [COMPLETED]


def test_progress_statuses_each_notified_in_order(prpc, receiver):
    prpc.agent = "steps"
    prpc.send("3", configuration={"taskPushNotificationConfig": {"url": receiver.url()}})
    got = receiver.wait_for(6)
    kinds = [("task" if "task" in r.json else "statusUpdate") for r in got]
    assert kinds == ["task", "statusUpdate", "statusUpdate", "statusUpdate", "statusUpdate",
                     "task"]
    texts = [r.json["statusUpdate"]["status"].get("message", {}).get("parts", [{}])[0]
             .get("text") for r in got[1:5]]
    assert texts == [None, "step 1", "step 2", "step 3"]


def test_a_final_task_over_64_kib_goes_without_artifacts(prpc, receiver):
    prpc.agent = "big"
    prpc.send("x", configuration={"taskPushNotificationConfig": {"url": receiver.url()}})
    got = receiver.wait_for(3)
    final = got[2].json["task"]
    assert len(got[2].body) <= 64 * 1024
    assert "artifacts" not in final and "history" not in final
    assert final["metadata"] == {"nexus.artifactsOmitted": True}
    assert final["status"]["state"] == COMPLETED
    stream_response(got[2])


def test_a_final_task_over_64_kib_without_artifacts_goes_without_its_status_message(
        prpc, receiver):
    # NOTE: before, a FAILED task whose message alone was 100 KB was sent whole (100,462
    # bytes): dropping the artifacts was the only step, whatever was left.
    task = prpc.send("/fail " + "x" * 100_000, configuration={"taskPushNotificationConfig": {
        "url": receiver.url()}})
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    got = receiver.wait_for(3)
    assert all(len(r.body) <= 64 * 1024 for r in got)
    final = got[2].json["task"]
    assert final == {"id": task["id"], "contextId": task["contextId"],
                     "status": {"state": "TASK_STATE_FAILED",
                                "timestamp": task["status"]["timestamp"]},
                     "metadata": {"nexus.artifactsOmitted": True}}
    stream_response(got[2])
    stored = prpc.result("GetTask", {"id": task["id"]})["status"]["message"]
    assert stored["parts"][0]["text"].endswith("x" * 100_000)


def test_rejected_at_admission_notifies_the_final_task(phub, receiver):
    from tests.hub.conftest import KEY_B, HubClient

    other = HubClient(phub, headers={"X-API-Key": KEY_B})
    task = other.send("beta test", configuration={"taskPushNotificationConfig": {
        "url": receiver.url()}})
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    got = receiver.wait_for(1)
    assert got[0].json["task"]["status"]["state"] == "TASK_STATE_REJECTED"
    assert "history" not in got[0].json["task"]


@pytest.mark.parametrize("status", [503, 500, 408, 425, 429])
def test_retried_answers_then_delivered(phub, prpc, receiver, status):
    receiver.script[:] = [status]
    task = prpc.send("hi", configuration={"taskPushNotificationConfig": {
        "id": "c1", "url": receiver.url()}})
    got = receiver.wait_for(4)
    first, retry = got[0], got[1]
    assert first.body == retry.body
    wait_until(lambda: phub.push.dispatcher.idle())
    key = create(prpc, task["id"], receiver.url(), id="c1")["authentication"]["credentials"]
    assert verify(first, key, receiver.url())["jti"] == verify(retry, key, receiver.url())["jti"]
    assert phub.sleeps.calls == [1.0]
    assert status_of(prpc, task["id"], "c1")["failures"] == 0


def test_five_hundreds_are_retried_three_times_then_dropped(phub, prpc, receiver, caplog):
    receiver.script[:] = [500, 500, 500, 500, 404, 404]
    with caplog.at_level(logging.WARNING, logger="murmur_wsgi.hub.push.dispatcher"):
        task = prpc.send("hi", configuration={"taskPushNotificationConfig": {
            "id": "c1", "url": receiver.url(path="/secret-path?q=1")}})
        got = receiver.wait_for(6)
        status = settled(prpc, task["id"], "c1", failures=3)
    assert len({r.body for r in got[:4]}) == 1            # one event, four attempts
    assert len({r.body for r in got[3:]}) == 3            # then one attempt per event
    assert got[0].path == "/secret-path?q=1"
    assert phub.sleeps.calls == list(RETRY_DELAYS) == [1.0, 2.0, 4.0]
    assert status == {"failures": 3, "disabled": False, "lastError": "HTTP 404"}
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 3 and dropped[0].endswith("(host 127.0.0.1): HTTP 500")
    assert "secret-path" not in caplog.text and str(receiver.port) not in caplog.text


@pytest.mark.parametrize("status", [302, 404, 400, 301])
def test_other_answers_are_final(phub, prpc, receiver, status):
    receiver.script[:] = [status]
    task = prpc.send("hi", configuration={"taskPushNotificationConfig": {
        "id": "c1", "url": receiver.url()}})
    got = receiver.wait_for(3)
    assert got[0].json["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert "statusUpdate" in got[1].json                  # the redirect was not followed
    assert all(r.path == "/a2a/hook" for r in got)
    status_now = settled(prpc, task["id"], "c1")
    assert status_now["lastError"] == f"HTTP {status}"
    assert phub.sleeps.calls == []


def test_five_failed_events_disable_and_create_re_enables(phub, prpc, receiver):
    prpc.agent = "steps"
    receiver.script[:] = [400] * 5
    task = prpc.send("4", configuration={"taskPushNotificationConfig": {
        "id": "c1", "url": receiver.url()}})
    status = settled(prpc, task["id"], "c1", disabled=True)
    assert status["failures"] == MAX_FAILURES
    assert status["lastError"] == "HTTP 400"
    assert status["disabledAt"].endswith("Z")
    wait_until(lambda: phub.push.dispatcher.idle())
    assert len(receiver.requests) == 5                    # 7 events; the last 2 never sent
    create(prpc, task["id"], receiver.url(), id="c1")
    assert status_of(prpc, task["id"], "c1") == {"failures": 0, "disabled": False}


def test_a_delivery_resets_the_failure_count(phub, prpc, receiver):
    receiver.script[:] = [404]
    task = prpc.send("hi", configuration={"taskPushNotificationConfig": {
        "id": "c1", "url": receiver.url()}})
    receiver.wait_for(3)
    wait_until(lambda: phub.push.dispatcher.idle())
    assert status_of(prpc, task["id"], "c1") == {"failures": 0, "disabled": False,
                                                 "lastError": "HTTP 404"}


def allow_port(hub, port: int) -> None:
    hub.push.ports = hub.push.egress.ports = frozenset(hub.push.ports | {port})


def test_each_attempt_has_a_deadline(phub, prpc, receiver):
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)                      # accepts, never answers the TLS handshake
    try:
        port = silent.getsockname()[1]
        allow_port(phub, port)
        phub.push.sender.attempt_secs = 0.05
        task = prpc.send("hi", configuration={"taskPushNotificationConfig": {
            "id": "c1", "url": f"https://127.0.0.1:{port}/h"}})
        status = settled(prpc, task["id"], "c1", failures=3)
        assert status["lastError"] == "timed out"
        assert phub.sleeps.calls[:3] == [1.0, 2.0, 4.0]
    finally:
        silent.close()


def test_connection_refused_is_retried(phub, prpc, receiver):
    import socket

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    allow_port(phub, port)
    task = prpc.send("hi", configuration={"taskPushNotificationConfig": {
        "id": "c1", "url": f"https://127.0.0.1:{port}/h"}})
    status = settled(prpc, task["id"], "c1", failures=3)
    assert status["lastError"] == "connection refused"
    assert phub.sleeps.calls[:3] == [1.0, 2.0, 4.0]


def test_the_drain_still_notifies_the_final_failed(phub, prpc, receiver):
    prpc.agent = "held"
    prpc.send("push-drain", configuration={"returnImmediately": True,
                                           "taskPushNotificationConfig": {"url": receiver.url()}})
    receiver.wait_for(2)                                  # SUBMITTED, WORKING
    assert phub.close(drain_timeout=0) == 1
    got = receiver.wait_for(3)
    final = got[2].json["task"]
    assert final["status"]["state"] == "TASK_STATE_FAILED"
    assert "interrupted" in final["status"]["message"]["parts"][0]["text"]


def test_at_most_two_configs_of_a_tenant_are_delivered_at_once(phub, prpc, receiver):
    receiver.hold.clear()
    for i in range(3):
        prpc.send(f"t{i}", configuration={"returnImmediately": True,
                                          "taskPushNotificationConfig": {"url": receiver.url()}})
    with receiver.cond:
        assert receiver.cond.wait_for(lambda: receiver.in_flight == 2, 10)
    assert phub.push.dispatcher.idle() is False
    receiver.hold.set()
    got = receiver.wait_for(9)
    assert receiver.most_in_flight == 2
    per_task: dict = {}
    for r in got:
        body = r.json
        task_id = body["task"]["id"] if "task" in body else body["statusUpdate"]["taskId"]
        per_task.setdefault(task_id, []).append(r)
    assert sorted(len(v) for v in per_task.values()) == [3, 3, 3]


@pytest.mark.parametrize("token, path", [("tk-\r\nX-Injected: 1", "/a2a/hook"),
                                         ("tk-\u2192", "/a2a/hook"),
                                         (None, "/h\u00e4ok")])
def test_a_config_http_cannot_write_is_dropped_once_per_event(phub, prpc, receiver, caplog,
                                                              token, path):
    # NOTE: before, http.client raised on the token (or the path) on every attempt: the
    # event never advanced, the dispatcher took it again at once (hundreds of tracebacks a
    # second, the token's value in them), and deliveryStatus said nothing. Create refuses
    # such a config now; one saved before it did is in the store as it is.
    with caplog.at_level(logging.DEBUG):
        task = prpc.send("hi")
        record = PushRecord("acme", "echo", task["id"], "c1", receiver.url(path=path), token)
        phub.stores.push.push_save(record, from_start=True)
        status = settled(prpc, task["id"], "c1", failures=3)
        wait_until(lambda: phub.push.dispatcher.idle())
    assert status == {"failures": 3, "disabled": False, "lastError":
                      "refused: the url or the token cannot be written in an HTTP request"}
    assert receiver.requests == [] and phub.resolver.calls == []
    assert phub.sleeps.calls == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "tk-" not in caplog.text


class RaisingEgress(Egress):
    """The hub's own egress, failing unexpectedly on every POST (a message that holds the
    token, as http.client's did): counts its calls."""

    def __init__(self, egress):
        super().__init__(egress.ports, egress.allow)
        self.posts = 0

    def post(self, url, body, headers, timeout):
        self.posts += 1
        raise RuntimeError(f"unexpected: {headers.get('A2A-Notification-Token')}")


def test_an_attempt_that_fails_unexpectedly_is_a_failed_attempt_on_the_retry_schedule(
        phub, prpc, receiver, caplog):
    # NOTE: before, the exception left the config's delivery: the lease was released, the
    # config was due again at once and taken again, the event never advanced, and every
    # turn logged a traceback quoting the exception's message (hundreds a second).
    egress = RaisingEgress(phub.push.egress)
    phub.push.egress = phub.push.sender.egress = egress
    config = {"id": "c1", "url": receiver.url(), "token": "tk-secret"}
    with caplog.at_level(logging.DEBUG):
        task = prpc.send("hi", configuration={"taskPushNotificationConfig": config})
        status = settled(prpc, task["id"], "c1", failures=3)
        wait_until(lambda: phub.push.dispatcher.idle())
    assert status == {"failures": 3, "disabled": False,
                      "lastError": "unexpected error (RuntimeError)"}
    assert egress.posts == 3 * 4                          # three events, four attempts each
    assert phub.sleeps.calls == list(RETRY_DELAYS) * 3
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 12 and all("failed unexpectedly: RuntimeError at " in e
                                     for e in errors)
    assert "tk-secret" not in caplog.text and SECRET not in caplog.text
    assert receiver.requests == []


class RaisingSender(Sender):
    """The hub's own sender, failing unexpectedly on every event: records when."""

    def __init__(self, sender, retry_scale):
        super().__init__(sender.egress, sender.master, sender.issuer, sender.sleep,
                         retry_scale)
        self.times: list[float] = []

    def send(self, record, seq, body):
        self.times.append(time.monotonic())
        raise RuntimeError(f"unexpected: {record.token}")


def test_a_config_whose_delivery_fails_unexpectedly_waits_the_retry_delays(
        phub, prpc, receiver, caplog):
    # NOTE: before, such a config was released and taken again at once: five tries took a
    # few milliseconds, each with a traceback.
    sender = RaisingSender(phub.push.sender, 0.1)         # waits of 0.1, 0.2, 0.4 s
    phub.push.dispatcher.sender = sender
    config = {"id": "c1", "url": receiver.url(), "token": "tk-secret"}
    with caplog.at_level(logging.DEBUG):
        task = prpc.send("hi", configuration={"taskPushNotificationConfig": config})
        wait_until(lambda: len(sender.times) >= 5)
        phub.push.dispatcher.close(grace=0)
    # NOTE: the config still fails, so it stays due: a close of the dispatcher stopped
    # above (the hub's, the fixture's) waited its whole grace (2 s) for it to catch up.
    closing = time.monotonic()
    phub.push.dispatcher.close()
    assert time.monotonic() - closing < 1.0
    gaps = [b - a for a, b in zip(sender.times, sender.times[1:])]
    assert all(gap >= wait for gap, wait in zip(gaps, [0.1, 0.2, 0.4, 0.4, 0.4, 0.4]))
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == len(sender.times)
    assert all("failed unexpectedly (RuntimeError at " in e for e in errors)
    assert "tk-secret" not in caplog.text and SECRET not in caplog.text
    assert status_of(prpc, task["id"], "c1") == {"failures": 0, "disabled": False}


class _HeldLook:
    """A store whose dispatcher's waiting look (``timeout`` > 0) is held until ``go``;
    ``late`` counts the calls that came after ``closed`` was set."""

    def __init__(self, closed: threading.Event):
        self.closed = closed
        self.looking = threading.Event()
        self.go = threading.Event()
        self.late = 0

    def push_due(self, owner, timeout, skip=frozenset()):
        if timeout > 0:
            self.looking.set()
            self.go.wait(10)
        if self.closed.is_set():
            self.late += 1
        return []

    def notify_push(self):
        pass


class _Told(threading.Event):
    """An Event that tells ``waiting`` when a wait on it begins."""

    def __init__(self, waiting: threading.Event):
        super().__init__()
        self.waiting = waiting

    def wait(self, timeout=None):
        self.waiting.set()
        return super().wait(timeout)


def test_close_returns_once_the_loop_made_its_last_call_on_the_store():
    # NOTE: before, close() returned while the loop's look was still on the store: the hub
    # then closed the store, and on Redis the look's late call opened a connection that
    # was never closed (a ResourceWarning in a test run).
    closed, joining = threading.Event(), threading.Event()
    store = _HeldLook(closed)
    dispatcher = Dispatcher(store, tasks=None, sender=None)
    dispatcher._ended = _Told(joining)
    dispatcher.start()
    assert store.looking.wait(10)

    def close():
        dispatcher.close(grace=0)
        closed.set()
    threading.Thread(target=close, daemon=True).start()
    wait_until(lambda: closed.is_set() or joining.is_set())
    assert not closed.is_set()                 # waiting for the loop, the look held
    store.go.set()
    assert closed.wait(10)
    assert store.late == 0


class _LeasedAtClose:
    """A store whose one due config's lease is granted once close() waits for the loop;
    ``late`` counts the calls that came after ``closed`` was set."""

    def __init__(self, closed: threading.Event, joining: threading.Event,
                 waited: threading.Event):
        self.closed, self.joining, self.waited = closed, joining, waited
        self.record = type("Due", (), {"tenant": "acme", "key": ("t1", "c1")})()
        self.leasing, self.released = threading.Event(), threading.Event()
        self.late = 0

    def push_due(self, owner, timeout, skip=frozenset()):
        return [self.record] if timeout > 0 and self.record.key not in skip else []

    def push_lease(self, record, owner):
        self.leasing.set()
        assert self.joining.wait(10)        # close() stopped the loop and waits for it
        self.waited.clear()
        return True

    def push_release(self, record, owner):
        self.waited.wait(5)                 # close() waits for the deliveries
        if self.closed.is_set():
            self.late += 1
        self.released.set()

    def notify_push(self):
        pass


class _ToldCondition(threading.Condition):
    """A Condition that tells ``waited`` when a wait_for on it begins."""

    def __init__(self, lock, waited: threading.Event):
        super().__init__(lock)
        self.waited = waited

    def wait_for(self, predicate, timeout=None):
        self.waited.set()
        return super().wait_for(predicate, timeout)


def test_close_waits_for_a_delivery_the_loop_started_as_it_closed():
    # NOTE: before, close() waited for the deliveries, then for the loop: a lease the loop
    # took meanwhile started one more delivery that nobody waited for, whose release came
    # on the store after close() returned (the hub closes the store next).
    closed, joining, waited = threading.Event(), threading.Event(), threading.Event()
    store = _LeasedAtClose(closed, joining, waited)
    dispatcher = Dispatcher(store, tasks=None, sender=None)
    dispatcher._ended = _Told(joining)
    dispatcher._idle = _ToldCondition(dispatcher._lock, waited)
    dispatcher.start()
    assert store.leasing.wait(10)
    dispatcher.close(grace=0)
    closed.set()
    assert store.released.is_set() and store.late == 0
