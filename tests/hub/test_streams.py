"""Streams and clients, events stored for replay, and the drain."""
from __future__ import annotations

import json
import logging
import threading
import time
import tracemalloc

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.methods import streams as stream_methods
from murmur_wsgi.hub.store.redis_keys import events_key, task_key
from murmur_wsgi.hub.task import HubTask

from tests.hub.agents import gate
from tests.hub.conftest import (KEY_B, HubClient, close_hub, hub_config, send_params,
                                sse_events, wait_until)

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too


def _payloads(chunk: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in chunk.decode().split("\n")
            if line.startswith("data: ")]


class Reader:
    """An SSE response read chunk by chunk (the test client keeps it open)."""

    def __init__(self, response):
        self.response = response
        self.chunks = iter(response.response)
        self.events: list[dict] = []
        self.raw = b""

    def read(self) -> list[dict]:
        chunk = next(self.chunks)
        self.raw += chunk
        got = _payloads(chunk)
        self.events.extend(got)
        return got

    def until_end(self) -> list[dict]:
        for chunk in self.chunks:
            self.raw += chunk
            self.events.extend(_payloads(chunk))
        return self.events

    def close(self):
        self.response.close()


def _kinds(events):
    return [next(iter(e["result"])) if "result" in e else "error" for e in events]


def _state(event):
    result = event["result"]
    if "task" in result:
        return result["task"]["status"]["state"]
    return result["statusUpdate"]["status"]["state"]


# --- SubscribeToTask ------------------------------------------------------------------


def test_subscribe_replays_from_the_start_then_live(rpc):
    rpc.agent = "partial"
    task = rpc.send("g-sub", configuration={"returnImmediately": True})
    wait_until(lambda: rpc.hub.runs.get(task["id"]).tokens)
    wait_until(lambda: len(rpc.hub.store.events(task["id"], 0, 0)[0]) >= 3)
    reader = Reader(rpc.call("SubscribeToTask", {"id": task["id"]}, buffered=False))
    opening = reader.read()
    assert _kinds(opening) == ["task", "statusUpdate", "artifactUpdate"]
    assert opening[0]["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert opening[2]["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"] == \
        "partial answer"
    gate("g-sub").set()
    events = reader.until_end()
    assert _kinds(events) == ["task", "statusUpdate", "artifactUpdate", "artifactUpdate",
                              "statusUpdate"]
    assert _state(events[-1]) == "TASK_STATE_COMPLETED"
    final_chunk = events[3]["result"]["artifactUpdate"]
    assert final_chunk["append"] is False and final_chunk["lastChunk"] is True


def test_subscribe_to_a_finished_task_replays_it_whole(rpc):
    started = time.monotonic()
    task = rpc.send("a b c", agent="tokens")
    elapsed = time.monotonic() - started
    events = sse_events(rpc.call("SubscribeToTask", {"id": task["id"]}, agent="tokens"))
    kinds = _kinds(events)
    assert kinds[:2] == ["task", "statusUpdate"] and kinds[-1] == "statusUpdate"
    chunks = [e["result"]["artifactUpdate"] for e in events[2:-1]]
    # The first token is stored at once, the next ones merged (one more per 250 ms the run
    # took, were it held up), then the last chunk.
    assert 2 <= len(chunks) <= 3 + elapsed // 0.25 and chunks[-1]["lastChunk"]
    assert "".join(c["artifact"]["parts"][0]["text"] for c in chunks[:-1]) == "a b c"
    assert _state(events[-1]) == "TASK_STATE_COMPLETED"


def test_subscribe_to_an_unknown_task(rpc):
    assert rpc.error("SubscribeToTask", {"id": "nope"})["code"] == -32001


def _forget(hub, task_id: str, *, task_too: bool = False) -> None:
    """What a store loses of a task while a stream reads it: its log (expired, evicted), and
    with ``task_too`` its record as well (a Redis flushed, or failed over without it)."""
    store = hub.store
    if hasattr(store, "_events"):                       # the memory store
        with store.lock:
            del store._events[task_id]
            if task_too:
                del store._tasks[task_id]
        return
    store._redis.delete(events_key("acme", task_id))
    if task_too:
        store._redis.delete(task_key("acme", task_id))


def _subscribed_then_finished(rpc, gate_name: str):
    """A SubscribeToTask stream that read a task's first events; the task over since."""
    rpc.agent = "partial"
    task = rpc.send(gate_name, configuration={"returnImmediately": True})
    wait_until(lambda: len(rpc.hub.store.events(task["id"], 0, 0)[0]) >= 3)
    reader = Reader(rpc.call("SubscribeToTask", {"id": task["id"]}, buffered=False))
    reader.request_id = rpc.next_id
    assert _kinds(reader.read()) == ["task", "statusUpdate", "artifactUpdate"]
    gate(gate_name).set()
    wait_until(lambda: rpc.result("GetTask", {"id": task["id"]})["status"]["state"]
               == "TASK_STATE_COMPLETED")
    return task, reader


def test_a_log_gone_before_its_final_event_was_read_ends_with_the_stored_task(rpc):
    task, reader = _subscribed_then_finished(rpc, "g-expired")
    _forget(rpc.hub, task["id"])
    events = reader.until_end()
    assert _kinds(events) == ["task", "statusUpdate", "artifactUpdate", "task"]
    assert events[-1]["result"]["task"] == rpc.result("GetTask", {"id": task["id"]})


def test_a_task_gone_with_its_log_under_a_stream_ends_it_with_32603(rpc, caplog):
    task, reader = _subscribed_then_finished(rpc, "g-gone")
    _forget(rpc.hub, task["id"], task_too=True)
    with caplog.at_level(logging.WARNING, logger=stream_methods.__name__):
        events = reader.until_end()
    assert events[3:] == [{"jsonrpc": "2.0", "id": reader.request_id, "error": {
        "code": -32603,
        "message": "Internal error: the hub's task store is unavailable; try again shortly"}}]
    assert any(f"SubscribeToTask {task['id']}: the task's log is gone" in r.getMessage()
               for r in caplog.records)
    assert rpc.error("GetTask", {"id": task["id"]})["code"] == -32001


def _trimming_hub(store: str, name: str, spec: str):
    """A hub whose Redis logs keep ``redis.max_events_per_task`` 100 events, serving the
    agent ``spec`` as acme's ``name``."""
    config = hub_config(store=store, redis={"max_events_per_task": 100})
    config["tenants"]["acme"]["agents"][name] = {"agent": spec, "publish": True}
    return create_hub(config)


def _until(chunks, raw: bytes, events: int) -> bytes:
    """``raw`` and the stream's next chunks, until it holds ``events`` whole events."""
    while raw.count(b"\n\n") < events:
        raw += next(chunks)
    return raw

def test_a_log_trimmed_from_its_start_opens_with_the_stored_task(store):
    """A log past ``redis.max_events_per_task`` loses its first events, the Task as created
    among them: a subscriber's stream opened with a statusUpdate of a task it never got.
    It opens with the stored Task; once the task is over, the stored Task alone, whole."""
    h = _trimming_hub(store, "reports", "tests.hub.agents:reports_then_holds")
    try:
        client = HubClient(h, "reports")
        task = client.send("300 1", configuration={"returnImmediately": True})
        wait_until(lambda: h.store.last_position(task["id"], "acme") >= 302)
        response = client.call("SubscribeToTask", {"id": task["id"]}, buffered=False)
        chunks = iter(response.response)
        raw = _until(chunks, b"", 1)                # the first event (chunks cut events)
        opening = _payloads(raw.partition(b"\n\n")[0])
        assert _kinds(opening) == ["task"]
        # The Task as created, or (its log trimmed) as it stands
        assert opening[0]["result"]["task"]["status"]["state"] == (
            "TASK_STATE_SUBMITTED" if store == "memory" else "TASK_STATE_WORKING")
        assert client.result("CancelTask", {"id": task["id"]})["status"]["state"] == \
            "TASK_STATE_CANCELED"
        assert _state(_payloads(raw + b"".join(chunks))[-1]) == "TASK_STATE_CANCELED"
        replay = sse_events(client.call("SubscribeToTask", {"id": task["id"]}))
        if store != "memory":                       # the memory store keeps a log whole
            assert replay == [{"jsonrpc": "2.0", "id": client.next_id, "result": {
                "task": client.result("GetTask", {"id": task["id"]})}}]
        assert _kinds(replay)[0] == "task" and _state(replay[-1]) == "TASK_STATE_CANCELED"
    finally:
        close_hub(h)


def test_a_stream_behind_its_logs_trim_goes_on_from_the_stored_task(store):
    """A subscriber that read the start of a log, then fell behind its trim (Redis keeps
    ``redis.max_events_per_task``), went on from the events the log still held: hundreds
    of statusUpdates silently missing. It goes on from the stored Task, as a stream whose
    log lost its start opens with it; the memory store keeps a log whole."""
    h = _trimming_hub(store, "gated", "tests.hub.agents:gated_reports")
    try:
        client = HubClient(h, "gated")
        task = client.send("g-behind 400", configuration={"returnImmediately": True})
        wait_until(lambda: h.store.last_position(task["id"], "acme") >= 2)
        response = client.call("SubscribeToTask", {"id": task["id"]}, buffered=False)
        chunks = iter(response.response)
        raw = _until(chunks, b"", 2)                # the Task as created, WORKING
        gate("g-behind").set()
        wait_until(lambda: h.store.last_position(task["id"], "acme") >= 402)
        raw = _until(chunks, raw, 3)                # read on while the task runs
        assert client.result("CancelTask", {"id": task["id"]})["status"]["state"] == \
            "TASK_STATE_CANCELED"
        events = _payloads(raw + b"".join(chunks))
        assert _kinds(events)[:2] == ["task", "statusUpdate"]
        rest = events[2:]
        if store != "memory":
            assert _kinds(rest)[0] == "task"        # the stored Task, as it stands
            assert _state(rest[0]) == "TASK_STATE_WORKING"
            rest = rest[1:]
        assert _state(rest[-1]) == "TASK_STATE_CANCELED"
        numbers = [int(e["result"]["statusUpdate"]["status"]["message"]["parts"][0]["text"][1:])
                   for e in rest[:-1]]
        assert numbers == list(range(numbers[0], 400))
        assert numbers[0] > 0 if store != "memory" else numbers[0] == 0
    finally:
        close_hub(h)


def test_streamed_tokens_are_stored_merged(rpc):
    started = time.monotonic()
    live = sse_events(rpc.call("SendStreamingMessage", send_params("x"), agent="many"))
    elapsed = time.monotonic() - started
    live_chunks = [e for e in live if "artifactUpdate" in e["result"]]
    assert len(live_chunks) == 61                       # every token, then the last chunk
    task_id = live[0]["result"]["task"]["id"]
    stored = sse_events(rpc.call("SubscribeToTask", {"id": task_id}, agent="many"))
    chunks = [e["result"]["artifactUpdate"] for e in stored if "artifactUpdate" in e["result"]]
    # About 0.6 s of tokens (longer on a loaded machine: the bound is the run's own time), at
    # most one stored event every 250 ms: the first token at once, one flush per 250 ms, the
    # rest at the end, then the last chunk. Unmerged, the 60 tokens would be 61 events.
    assert 2 <= len(chunks) <= elapsed / 0.25 + 3, (len(chunks), elapsed)
    text = "".join(c["artifact"]["parts"][0]["text"] for c in chunks[:-1])
    assert text == "".join(f"t{i} " for i in range(60))
    assert [c["append"] for c in chunks] == [False] + [True] * (len(chunks) - 1)


def test_a_late_merge_timer_waits_its_turn():
    """A token stored while the merge timer ran late (a loaded machine): the timer's own
    flush then waits merge_secs from that one, at most one stored event per merge_secs."""
    hub = create_hub(hub_config(events={"merge_secs": 0.05}))
    timers = []

    def held_timer(seconds, fn):            # the test fires them, as late as it likes
        timers.append(threading.Timer(seconds, fn))
        return timers[-1]

    hub.runs.timer = held_timer
    task = HubClient(hub, "held").send("g-late", configuration={"returnImmediately": True})
    run = hub.runs.get(task["id"])

    def stored() -> list[str]:
        events = [json.loads(e.payload) for e in hub.store.events(task["id"], 0, 0)[0]]
        return [e["artifactUpdate"]["artifact"]["parts"][0]["text"] for e in events
                if "artifactUpdate" in e]

    def merge_due():
        wait_until(lambda: time.monotonic() >= run.last_flush + 0.05)

    run.token("a")                          # the first token: stored at once
    run.token("b")                          # the next: a timer for merge_secs after
    late = timers[-1]
    merge_due()
    run.token("c")                          # the timer is late: this token stores "bc"
    run.token("d")
    late.function()                         # the late timer runs now
    assert stored() == ["a", "bc"]          # "d" waits its turn
    turn = timers[-1]
    assert turn is not late and 0 < turn.interval <= 0.05
    merge_due()
    turn.function()
    assert stored() == ["a", "bc", "d"]
    gate("g-late").set()
    wait_until(lambda: hub.runs.get(task["id"]) is None)
    hub.close(0)


def test_events_expire_the_task_stays(store):
    hub = create_hub(hub_config(store=store, events={"retention_secs": 0.05}))
    try:
        client = HubClient(hub)
        task = client.send("short-lived")
        wait_until(lambda: not hub.store.has_events(task["id"]))
        events = sse_events(client.call("SubscribeToTask", {"id": task["id"]}))
        assert len(events) == 1
        assert events[0]["result"]["task"] == client.result("GetTask", {"id": task["id"]})
        assert client.result("ListTasks", {})["totalSize"] == 1
    finally:
        close_hub(hub)


def test_max_subscriptions_per_tenant(hub):
    client = HubClient(hub, "held", {"X-API-Key": KEY_B})     # globex: 1 subscription
    task = client.send("g-max", configuration={"returnImmediately": True})
    first = Reader(client.call("SubscribeToTask", {"id": task["id"]}, buffered=False))
    first.read()
    assert client.error("SubscribeToTask", {"id": task["id"]}) == {
        "code": -32600, "message": "this tenant already has 1 SubscribeToTask streams open "
                                   "on this replica; close one, or poll with GetTask"}
    # Another tenant's streams do not count.
    acme = HubClient(hub, "echo")
    done = acme.send("x")
    assert sse_events(acme.call("SubscribeToTask", {"id": done["id"]}))
    first.close()
    gate("g-max").set()
    assert sse_events(client.call("SubscribeToTask", {"id": task["id"]}))


def test_subscription_lifetime_ends_with_32000(hub, monkeypatch):
    monkeypatch.setattr(stream_methods, "EXTRA_LIFETIME_SECS", 0.15 - 30)   # run timeout 30 s
    rpc = HubClient(hub, "held")
    task = rpc.send("g-life", configuration={"returnImmediately": True})
    events = sse_events(rpc.call("SubscribeToTask", {"id": task["id"]}))
    assert events[-1] == {"jsonrpc": "2.0", "id": 2, "error": {
        "code": -32000, "message": "this subscription has lived 0.15 s, its limit; subscribe "
        "again or poll with GetTask"}}
    gate("g-life").set()


@pytest.mark.timed
@pytest.mark.waits
def test_a_subscription_lives_the_run_timeout_and_two_seconds(store):
    """The text: a subscription lives at most --run-timeout + 2 s. A task no run ends (its
    replica gone, not swept yet) is followed for the tenant's run_timeout_secs (0.2) + 2 s."""
    hub = create_hub(hub_config(store=store, limits={"run_timeout_secs": 0.2}))
    try:
        message = {"messageId": "m-orphan", "role": "ROLE_USER", "parts": [{"text": "x"}]}
        task = HubTask("orphan-task", "ctx", "acme", "echo", "m-orphan", message)
        hub.store.create(task, task.task_event(), bind=False)
        started = time.monotonic()
        events = sse_events(HubClient(hub).call("SubscribeToTask", {"id": task.id}))
        assert 2.2 <= time.monotonic() - started < 4
        assert events[-1]["error"] == {"code": -32000, "message": "this subscription has "
                                       "lived 2.2 s, its limit; subscribe again or poll with "
                                       "GetTask"}
    finally:
        close_hub(hub)


def test_keepalive():
    hub = create_hub(hub_config(stream={"keepalive_secs": 0.02}))
    client = HubClient(hub, "held")
    reader = Reader(client.call("SendStreamingMessage", send_params("g-beat"), buffered=False))
    reader.read()
    while b":heartbeat\n\n" not in reader.raw:
        reader.raw += next(reader.chunks)
    gate("g-beat").set()
    assert _state(reader.until_end()[-1]) == "TASK_STATE_COMPLETED"
    hub.close(0)


def test_a_subscription_beats_under_the_write_deadline_with_the_a2a_headers():
    """SubscribeToTask has a sender's stream's keep-alive and write deadline, and the
    headers of every /a2a/v1 answer."""
    import socket

    hub = create_hub(hub_config(stream={"keepalive_secs": 0.02}))
    here, there = socket.socketpair()
    try:
        client = HubClient(hub, "held")
        task = client.send("g-sub-beat", configuration={"returnImmediately": True})
        response = client.call("SubscribeToTask", {"id": task["id"]}, buffered=False,
                               environ_overrides={"gunicorn.socket": here})
        assert (response.headers["Content-Type"], response.headers["Cache-Control"],
                response.headers["Vary"]) == ("text/event-stream", "private, no-store",
                                              "Authorization, X-API-Key, X-Tenant-ID")
        reader = Reader(response)
        reader.read()
        while b":heartbeat\n\n" not in reader.raw:
            reader.raw += next(reader.chunks)
        assert here.gettimeout() == 10.0
        gate("g-sub-beat").set()
        assert _state(reader.until_end()[-1]) == "TASK_STATE_COMPLETED"
        reader.close()
        assert here.gettimeout() is None
    finally:
        here.close()
        there.close()
        hub.close(0)


# --- clients that leave ---------------------------------------------------------------


def test_a_streaming_client_that_leaves_cancels_the_run(rpc):
    reader = Reader(rpc.call("SendStreamingMessage", send_params("g-leave"), agent="partial",
                             buffered=False))
    task_id = reader.read()[0]["result"]["task"]["id"]
    wait_until(lambda: rpc.hub.runs.get(task_id) is not None and rpc.hub.runs.get(task_id).tokens)
    reader.close()
    wait_until(lambda: rpc.result("GetTask", {"id": task_id}, agent="partial")["status"]["state"]
               == "TASK_STATE_CANCELED")


def test_a_subscriber_that_leaves_does_not_cancel(rpc):
    rpc.agent = "held"
    task = rpc.send("g-stay", configuration={"returnImmediately": True})
    reader = Reader(rpc.call("SubscribeToTask", {"id": task["id"]}, buffered=False))
    reader.read()
    reader.close()
    gate("g-stay").set()
    wait_until(lambda: rpc.result("GetTask", {"id": task["id"]})["status"]["state"]
               == "TASK_STATE_COMPLETED")


# --- the drain ---------------------------------------------------------------------------


def test_drain_waits_then_interrupts():
    hub = create_hub(hub_config())
    client = HubClient(hub, "held")
    background = client.send("g-drain-bg", configuration={"returnImmediately": True})
    quick = client.send("g-drain-quick", configuration={"returnImmediately": True})
    reader = Reader(client.call("SubscribeToTask", {"id": background["id"]}, buffered=False))
    reader.read()
    held = {}
    thread = threading.Thread(target=lambda: held.update(task=client.send("g-drain-held")))
    thread.start()
    wait_until(lambda: len(hub.runs.in_flight()) == 3)
    gate("g-drain-quick").set()                 # finishes within the drain
    interrupted = hub.close(drain_timeout=1.0)
    assert interrupted == 2
    thread.join(5)
    assert not thread.is_alive()
    assert held["task"]["status"]["state"] == "TASK_STATE_FAILED"
    assert held["task"]["status"]["message"]["parts"][0]["text"] == (
        "interrupted: the hub shut down before the run ended")
    states = {t["id"]: t["status"]["state"] for t in client.result("ListTasks", {})["tasks"]}
    assert states[background["id"]] == "TASK_STATE_FAILED"
    assert states[quick["id"]] == "TASK_STATE_COMPLETED"
    events = reader.until_end()
    assert _state(events[-1]) == "TASK_STATE_FAILED"
    # A closed hub admits nothing.
    assert client.send("g-after")["status"]["state"] == "TASK_STATE_REJECTED"


# --- memory per finished task ---------------------------------------------------------------


def test_memory_per_finished_task_is_bounded():
    hub = create_hub(hub_config(limits={"rate_per_minute": 100_000}))
    client = HubClient(hub)
    for i in range(50):
        client.send(f"warm {i}")
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(300):
        client.send(f"message number {i}")
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    per_task = grown / 300
    print(f"bytes per finished task: {per_task:.0f}")
    assert per_task < 12_000, per_task
    hub.close(0)


def test_each_write_has_the_write_deadline(rpc):
    """gunicorn's client socket gets stream.write_timeout_secs while a stream is written."""
    import socket

    here, there = socket.socketpair()
    try:
        reader = Reader(rpc.call("SendStreamingMessage", send_params("g-deadline"), agent="held",
                                 buffered=False, environ_overrides={"gunicorn.socket": here}))
        reader.read()
        assert here.gettimeout() == 10.0
        reader.close()
        assert here.gettimeout() is None
    finally:
        here.close()
        there.close()
