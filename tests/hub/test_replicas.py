"""Two replicas of one hub on one Redis (two Hub objects, each its own runs and replica id).

What a client asks of any replica: a run on A seen, listed, subscribed to and
canceled from B; one run per messageId raced on both; a replica that
vanishes has its runs ended FAILED by the other's sweep, final event
included; Redis down answers -32603 with a public message, and the hub
recovers when it returns.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time

import pytest

import yaml

from murmur_wsgi.cli import main
from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.redis_keys import mark_key

from tests.hub.agents import gate
from tests.hub.conftest import (FAST, KEY_B, HubClient, hub_config, not_cancelable,
                                send_params, sse_events, wait_until)
from tests.hub.conftest import agent as hosted
from tests.redis_util import RedisServer

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

def _state(rpc, task_id, agent=None):
    return rpc.result("GetTask", {"id": task_id}, agent=agent)["status"]["state"]


def test_a_run_on_a_is_seen_listed_and_followed_on_b(pair):
    a, b = pair
    a.agent = b.agent = "held"
    task = a.send("g-ab", configuration={"returnImmediately": True})
    wait_until(lambda: _state(b, task["id"]) == "TASK_STATE_WORKING")
    listed = b.result("ListTasks", {})
    assert [t["id"] for t in listed["tasks"]] == [task["id"]] and listed["totalSize"] == 1
    stream = b.call("SubscribeToTask", {"id": task["id"]}, buffered=False)
    chunks = iter(stream.response)
    assert b"TASK_STATE_WORKING" in next(chunks)           # the replay, then live
    gate("g-ab").set()
    rest = b"".join(chunks).decode()
    assert "TASK_STATE_COMPLETED" in rest and "released" in rest
    assert _state(b, task["id"]) == "TASK_STATE_COMPLETED"
    assert a.result("GetTask", {"id": task["id"]}) == b.result("GetTask", {"id": task["id"]})


def test_max_subscriptions_counts_on_each_replica(pair):
    """The text: at most limits.max_subscriptions SubscribeToTask streams per tenant "on
    each replica" (globex: 1); one more on the same replica is -32600, on another it opens."""
    a, b = pair
    for rpc in pair:
        rpc.headers, rpc.agent = {"X-API-Key": KEY_B}, "held"
    task = a.send("g-subs", configuration={"returnImmediately": True})
    first = a.call("SubscribeToTask", {"id": task["id"]}, buffered=False)
    other = b.call("SubscribeToTask", {"id": task["id"]}, buffered=False)
    try:
        assert b"TASK_STATE_WORKING" in next(iter(first.response))
        assert b"TASK_STATE_WORKING" in next(iter(other.response))
        assert a.error("SubscribeToTask", {"id": task["id"]}) == {
            "code": -32600, "message": "this tenant already has 1 SubscribeToTask streams open "
                                       "on this replica; close one, or poll with GetTask"}
    finally:
        first.close()
        other.close()
        gate("g-subs").set()


def test_cancel_from_b_of_a_run_on_a_that_does_not_stop_is_32002(pair):
    """The text: a run that does not stop within the cancel timeout is TaskNotCancelableError,
    from another replica as from its own; the task goes on, WORKING."""
    a, b = pair
    a.agent = b.agent = "stubborn"
    b.hub.config.cancel_timeout_secs = 0.2
    task = a.send("g-b-stubborn", configuration={"returnImmediately": True})
    try:
        assert gate("g-b-stubborn-in").wait(5)                 # its agent executes, on A
        assert b.error("CancelTask", {"id": task["id"]}) == not_cancelable(
            task["id"], "TASK_STATE_WORKING", "it did not stop within 0.2 s")
        assert _state(b, task["id"]) == "TASK_STATE_WORKING"
    finally:
        gate("g-b-stubborn").set()


def test_cancel_from_b_cuts_the_run_on_a(pair):
    a, b = pair
    a.agent = b.agent = "partial"
    task = a.send("g-cancel", configuration={"returnImmediately": True})
    wait_until(lambda: a.hub.runs.get(task["id"]).tokens)
    canceled = b.result("CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert canceled["artifacts"][0]["parts"][0]["text"] == "partial answer"
    events = sse_events(a.call("SubscribeToTask", {"id": task["id"]}))
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert b.error("CancelTask", {"id": task["id"]})["code"] == -32002


def test_a_cancel_heard_on_the_channel_is_looked_at_off_the_listener(pair, monkeypatch):
    """The listener reads every stream's notifications: a cancel it hears for a run here is
    looked at (whether another replica ended the task: a Redis command) on another thread,
    so that a slow command never holds the notifications behind it."""
    a, b = pair
    a.agent = b.agent = "held"
    looked_from = []
    ended_of = a.hub.replica.store.ended_of

    def spy(named):
        looked_from.append(threading.current_thread().name)
        return ended_of(named)
    monkeypatch.setattr(a.hub.replica.store, "ended_of", spy)
    for n in range(5):
        task = a.send(f"g-heard-{n}", configuration={"returnImmediately": True})
        wait_until(lambda: a.hub.runs.get(task["id"]) is not None)
        looked_from.clear()
        assert b.result("CancelTask", {"id": task["id"]})["status"]["state"] == \
            "TASK_STATE_CANCELED"
        assert "hub-events" not in looked_from, looked_from


def test_a_cancel_heard_whose_look_fails_unexpectedly_is_logged_not_raised_in_its_thread(
        pair, monkeypatch, caplog):
    """The thread a cancel heard starts logs what fails in it unexpectedly (the listener
    logged it when it looked there itself); the replica's mark check stops the run."""
    a, b = pair
    a.agent = b.agent = "held"
    raised = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    ended_of = a.hub.replica.store.ended_of
    failures = []

    def once(named):
        if threading.current_thread().name == "hub-cancel" and not failures:
            failures.append(named)
            raise RuntimeError("a bug")
        return ended_of(named)
    monkeypatch.setattr(a.hub.replica.store, "ended_of", once)
    task = a.send("g-heard-fails", configuration={"returnImmediately": True})
    wait_until(lambda: a.hub.runs.get(task["id"]) is not None)
    with caplog.at_level(logging.ERROR):
        # NOTE: heard as the cancel channel's listener hears it, called here: through B's
        # CancelTask, A's mark check could stop the run before the message came (a loaded
        # machine), and no thread would start.
        a.hub.replica.cancelled(task["id"])
        wait_until(lambda: failures and not a.hub.replica._stopping)
        assert b.result("CancelTask", {"id": task["id"]})["status"]["state"] == \
            "TASK_STATE_CANCELED"
    assert failures and [r.exc_info[0] for r in caplog.records if r.exc_info] == \
        [RuntimeError], caplog.text
    assert [args.thread.name for args in raised] == [], raised


def test_the_mark_check_cancels_without_pub_sub(pair):
    a, b = pair
    a.agent = b.agent = "held"
    task = a.send("g-mark", configuration={"returnImmediately": True})
    # The mark alone, as if its pub/sub message were lost: A's once-a-tick check finds it.
    b.hub.store._redis.set(mark_key("acme", task["id"]), "1")
    wait_until(lambda: _state(b, task["id"]) == "TASK_STATE_CANCELED", timeout=5)


def test_one_run_per_message_id_raced_on_both(pair):
    a, b = pair
    a.agent = b.agent = "held"
    params = send_params("g-race", message_id="raced", configuration={"returnImmediately": True})
    answers = [None, None]
    start = threading.Barrier(2)

    def send(i, rpc):
        start.wait(5)
        answers[i] = rpc.call("SendMessage", params).get_json()

    threads = [threading.Thread(target=send, args=(i, rpc)) for i, rpc in enumerate(pair)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    ids = {ans["result"]["task"]["id"] for ans in answers if "result" in ans}
    errors = [ans["error"]["code"] for ans in answers if "error" in ans]
    assert len(ids) == 1 and errors in ([], [-32600])
    assert len(a.hub.runs.in_flight()) + len(b.hub.runs.in_flight()) == 1
    assert a.result("ListTasks", {})["totalSize"] == 1


def test_a_vanished_replica_s_runs_end_failed_through_the_sweep(pair):
    a, b = pair
    a.agent = b.agent = "stubborn"
    task = a.send("g-dead", configuration={"returnImmediately": True})
    wait_until(lambda: _state(b, task["id"]) == "TASK_STATE_WORKING")
    stream = b.call("SubscribeToTask", {"id": task["id"]}, buffered=False)
    chunks = iter(stream.response)
    next(chunks)
    # A vanishes: no more liveness renewals, its key gone (what SIGKILL leaves after the TTL).
    a.hub.replica.stop()
    a.hub.store._redis.delete(f"murmur:{{hub}}:replica:{a.hub.store.replica}")
    rest = b"".join(chunks).decode()
    assert "TASK_STATE_FAILED" in rest and "interrupted" in rest
    # The run keeps going on A, and ends: the task keeps its one final state.
    gate("g-dead").set()
    wait_until(lambda: not a.hub.runs.in_flight())
    assert _state(b, task["id"]) == "TASK_STATE_FAILED"
    finals = [e for e in sse_events(b.call("SubscribeToTask", {"id": task["id"]}))
              if "statusUpdate" in e["result"]
              and e["result"]["statusUpdate"]["status"]["state"] != "TASK_STATE_WORKING"]
    assert len(finals) == 1


def test_a_task_the_sweep_ends_keeps_what_its_stream_published(pair):
    a, b = pair
    a.agent = b.agent = "publishes"
    task = a.send("g-swept", configuration={"returnImmediately": True})

    def logged() -> str:
        events, _ = b.hub.store.events(task["id"], 0, 0, tenant="acme")
        return "".join(event.payload for event in events)
    wait_until(lambda: '"notes"' in logged() and "partial" in logged())
    a.hub.replica.stop()                # A vanishes: B's sweep ends its run FAILED
    a.hub.store._redis.delete(f"murmur:{{hub}}:replica:{a.hub.store.replica}")
    wait_until(lambda: _state(b, task["id"]) == "TASK_STATE_FAILED")
    stored = b.result("GetTask", {"id": task["id"]})
    assert stored["status"]["message"]["parts"][0]["text"].startswith("interrupted")
    assert [(artifact["artifactId"], [part["text"] for part in artifact["parts"]])
            for artifact in stored["artifacts"]] == [("notes", ["kept"]),
                                                     ("answer", ["partial"])]
    gate("g-swept").set()
    wait_until(lambda: not a.hub.runs.in_flight())
    assert b.result("GetTask", {"id": task["id"]})["artifacts"] == stored["artifacts"]


def _rest_of(chunks, timeout: float = 10.0) -> list[dict]:
    """The events left in an SSE body, read on a thread: fails if the stream does not end."""
    body = []
    reader = threading.Thread(target=lambda: body.append(b"".join(chunks)), daemon=True)
    reader.start()
    reader.join(timeout)
    assert not reader.is_alive(), "the stream did not end"
    return [json.loads(line[len("data: "):]) for line in body[0].decode().split("\n")
            if line.startswith("data: ")]


def _streaming_on_a(a, text):
    """SendStreamingMessage on A: its open stream and the task id it announced."""
    response = a.call("SendStreamingMessage", send_params(text), buffered=False)
    chunks = iter(response.response)
    opening = next(chunks).decode()
    task = json.loads(opening[opening.index("data: ") + 6:].split("\n")[0])["result"]["task"]
    wait_until(lambda: _state(a, task["id"]) == "TASK_STATE_WORKING")
    return chunks, task["id"]


def _final_of(events) -> dict:
    status = events[-1]["result"]["statusUpdate"]["status"]
    assert [e for e in events if "statusUpdate" in e["result"]
            and e["result"]["statusUpdate"]["status"]["state"] != "TASK_STATE_WORKING"] == \
        events[-1:]                                     # one final event, the last one
    return status


def test_the_sender_s_stream_ends_with_an_end_another_replica_wrote(pair):
    a, b = pair
    a.agent = b.agent = "stubborn"
    released = gate("g-own")
    chunks, task_id = _streaming_on_a(a, "g-own")
    # Another replica writes the task's end, without a word to A (no pub/sub): A's
    # once-a-tick check finds it, and the sender's stream ends with that end.
    assert b.hub.store.end(task_id, "TASK_STATE_FAILED", "ended elsewhere", None, [],
                           tenant="acme")
    status = _final_of(_rest_of(chunks))
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"][0]["text"] == "ended elsewhere"
    released.set()                                      # the run keeps going, and ends
    wait_until(lambda: not a.hub.runs.in_flight())
    assert _state(b, task_id) == "TASK_STATE_FAILED"


def test_the_sender_s_stream_on_a_replica_taken_for_dead_ends_with_the_sweep_s_end(pair):
    a, b = pair
    a.agent = b.agent = "stubborn"
    released = gate("g-paused")
    chunks, task_id = _streaming_on_a(a, "g-paused")
    # A pauses (no renewals, no ticks) long enough to be taken for dead, but still listens:
    # B's sweep ends the task FAILED and says so on the channel.
    a.hub.replica.stop()
    a.hub.store._redis.delete(f"murmur:{{hub}}:replica:{a.hub.store.replica}")
    status = _final_of(_rest_of(chunks))
    assert status["state"] == "TASK_STATE_FAILED"
    assert "interrupted" in status["message"]["parts"][0]["text"]
    wait_until(lambda: not a.hub.runs.in_flight())     # over on A too, though still running
    released.set()
    finals = [e for e in sse_events(b.call("SubscribeToTask", {"id": task_id}))
              if "statusUpdate" in e["result"]]
    assert _final_of(finals)["state"] == "TASK_STATE_FAILED"


def test_the_drain_ends_the_rest_failed_and_b_sees_it(pair):
    a, b = pair
    a.agent = b.agent = "stubborn"
    task = a.send("g-drain", configuration={"returnImmediately": True})
    wait_until(lambda: _state(b, task["id"]) == "TASK_STATE_WORKING")
    assert a.hub.close(drain_timeout=0.1) == 1
    got = b.result("GetTask", {"id": task["id"]})
    assert got["status"]["state"] == "TASK_STATE_FAILED"
    assert "interrupted" in got["status"]["message"]["parts"][0]["text"]


# --- Redis misbehaves -------------------------------------------------------------------


def test_redis_down_answers_32603_then_recovers(tmp_path):
    server = restarted = RedisServer(tmp_path).start()
    hub = create_hub(hub_config(store=server.url, redis=dict(FAST)))
    rpc = HubClient(hub, "held")
    try:
        task = rpc.send("g-down", configuration={"returnImmediately": True})
        stream = rpc.call("SubscribeToTask", {"id": task["id"]}, buffered=False)
        chunks = iter(stream.response)
        next(chunks)
        server.stop()
        rest = b"".join(chunks).decode()
        assert '"code":-32603' in rest and "store is unavailable" in rest
        started = time.monotonic()
        error = rpc.error("GetTask", {"id": task["id"]})
        assert time.monotonic() - started < 5
        assert error == {"code": -32603, "message": "Internal error: the hub's task store is "
                                                    "unavailable; try again shortly"}
        error = rpc.error("SendMessage", send_params("g-x"))
        assert error["code"] == -32603
        restarted = RedisServer(tmp_path, port=server.port).start()
        # NOTE: this Redis keeps nothing (--save ""): the hub answers again, the task is gone.
        wait_until(lambda: "result" in rpc.call("ListTasks", {}).get_json(), timeout=10)
        again = rpc.send("g-up", configuration={"returnImmediately": True})
        assert _state(rpc, again["id"]) in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    finally:
        gate("g-down").set()
        gate("g-up").set()
        hub.close(drain_timeout=5)
        server.stop()
        restarted.stop()


def refused_within(rpc, task_id: str, timeout: float) -> None:
    """GetTask, ListTasks and SendMessage each answer -32603 within ``timeout`` (a bit more:
    the request's own time), as they must while the store's Redis answers nothing."""
    for method, params in (("GetTask", {"id": task_id}), ("ListTasks", {}),
                           ("SendMessage", send_params("stalled"))):
        started = time.monotonic()
        error = rpc.error(method, params)
        took = time.monotonic() - started
        assert error == {"code": -32603, "message": "Internal error: the hub's task "
                         "store is unavailable; try again shortly"}, method
        assert took < 1.8 * timeout, f"{method} answered in {took:.2f} s"


@pytest.mark.timed
@pytest.mark.waits
def test_a_stalled_redis_answers_32603_within_its_timeout_then_recovers(tmp_path):
    """redis-server stopped (SIGSTOP): connections open, nothing answers. Each request
    is refused within ``redis.timeout_secs`` (a timed-out command is not sent again)."""
    # NOTE: FAST's half second: what is proved scales with it (a command sent again would
    # take twice it, the bound is 1.8 times it) and a request's own time is a few ms.
    timeout = FAST["timeout_secs"]
    server = RedisServer(tmp_path).start()
    hub = create_hub(hub_config(store=server.url, redis=dict(FAST)))
    rpc, held = HubClient(hub, "echo"), HubClient(hub, "held")
    try:
        task = rpc.send("hello")
        assert _state(rpc, task["id"]) == "TASK_STATE_COMPLETED"
        running = held.send("g-stalled", configuration={"returnImmediately": True})
        chunks = iter(held.call("SubscribeToTask", {"id": running["id"]},
                                buffered=False).response)
        next(chunks)
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            rest = b"".join(chunks).decode()                # the stream ends, with the error
            assert '"code":-32603' in rest and "store is unavailable" in rest
            refused_within(rpc, task["id"], timeout)
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        wait_until(lambda: "result" in rpc.call("GetTask", {"id": task["id"]}).get_json())
        assert _state(rpc, task["id"]) == "TASK_STATE_COMPLETED"
        assert _state(rpc, rpc.send("again")["id"]) == "TASK_STATE_COMPLETED"
    finally:
        gate("g-stalled").set()
        hub.close(drain_timeout=5)
        server.stop()


def test_a_run_whose_streamed_text_cannot_be_stored_still_ends_with_its_whole_answer(tmp_path):
    """Redis goes away mid-run: the tokens not stored yet are kept, the run ends (its end
    written once Redis is back), and the final event carries the whole answer."""
    server = RedisServer(tmp_path, persist=True).start()
    hub = create_hub(hub_config(store=server.url, redis=dict(FAST)))
    rpc = HubClient(hub, "streams_on")
    restarted = None
    try:
        task = rpc.send("g-streams", configuration={"returnImmediately": True})
        wait_until(lambda: any('"first"' in e.payload
                               for e in hub.store.events(task["id"], 0, 0)[0]))
        server.stop()
        gate("g-streams").set()
        wait_until(lambda: hub.runs.get(task["id"]) is None)         # the run ended
        restarted = RedisServer(tmp_path, port=server.port, persist=True).start()
        wait_until(lambda: "result" in rpc.call("GetTask", {"id": task["id"]}).get_json()
                   and _state(rpc, task["id"]) == "TASK_STATE_COMPLETED")
        answer = rpc.result("GetTask", {"id": task["id"]})["artifacts"][-1]
        assert answer["parts"][0]["text"] == "first second"
        events = [json.loads(e.payload) for e in hub.store.events(task["id"], 0, 0)[0]]
        last = [e["artifactUpdate"] for e in events if "artifactUpdate" in e][-1]
        assert last["append"] is False and last["lastChunk"] is True
        assert last["artifact"]["parts"][0]["text"] == "first second"
    finally:
        gate("g-streams").set()
        hub.close(drain_timeout=5)
        server.stop()
        if restarted is not None:
            restarted.stop()


def test_redis_restarted_mid_load_loses_no_acknowledged_task(tmp_path):
    server = RedisServer(tmp_path, persist=True).start()
    # NOTE: a blocking SendMessage to echo takes about a millisecond: the default
    # 120 runs a minute would refuse (REJECTED) what this load sends before Redis stops.
    hub = create_hub(hub_config(store=server.url, redis=dict(FAST),
                                limits={"run_timeout_secs": 30, "rate_per_minute": 100_000}))
    rpc = HubClient(hub, "echo")
    acknowledged, statuses, codes = [], [], set()
    stop = threading.Event()

    def load():
        while not stop.is_set():
            response = rpc.call("SendMessage", send_params("hello"))
            statuses.append(response.status_code)
            payload = response.get_json()
            if "result" in payload:
                task = payload["result"]["task"]
                acknowledged.append((task["id"], task["status"]["state"]))
            else:
                codes.add(payload["error"]["code"])

    worker = threading.Thread(target=load)
    worker.start()
    restarted = None
    try:
        wait_until(lambda: len(acknowledged) >= 20)
        server.stop()
        wait_until(lambda: -32603 in codes)
        restarted = RedisServer(tmp_path, port=server.port, persist=True).start()
        count = len(acknowledged)
        wait_until(lambda: len(acknowledged) >= count + 20)
    finally:
        stop.set()
        worker.join(10)
        try:
            assert set(statuses) == {200} and codes == {-32603}
            assert {told for _, told in acknowledged} == {"TASK_STATE_COMPLETED"}
            for task_id, _ in acknowledged:
                assert rpc.result("GetTask", {"id": task_id})["status"]["state"] == \
                    "TASK_STATE_COMPLETED"
        finally:
            hub.close(drain_timeout=5)
            server.stop()
            if restarted is not None:
                restarted.stop()


def test_more_than_one_worker_needs_the_redis_store(tmp_path, capsys):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump(hub_config(tenants={"t": {"agents": {"e": hosted("demo")}}})))
    assert main(["hub", "--config", str(path), "--workers", "2"]) == 2
    assert capsys.readouterr().err.strip() == (
        "murmur-wsgi: --workers: 2: the memory store lives in one process; more than 1 worker "
        "needs Redis: set MURMUR_HUB_REDIS_URL=redis://host:port/0 (or redis.url, or store: "
        "redis://…)")
