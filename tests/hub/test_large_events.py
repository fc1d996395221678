"""A stream's event larger than a page of its log, on Redis: read once the worker has room
for it (``large_reads``), and kept in its task's buffer only while it holds room there.

Before, each stream opening on such an event (an artifact of many MiB) read a copy of its
own at once, however many opened, and each task its streams read kept its newest event
in the worker's buffer whatever its size, for as long as a stream waited on the task.
"""
from __future__ import annotations

import threading
import uuid

import pytest

from murmur_wsgi.hub.store.base import StoredEvent
from murmur_wsgi.hub.store.large_reads import LargeReads
from murmur_wsgi.hub.store.redis_feed import PAGE_BYTES
from murmur_wsgi.hub.store.redis_keys import events_key
from murmur_wsgi.hub.store.redis_watched import BUFFER_BYTES, Watched
from murmur_wsgi.hub.task import HubTask
from murmur_wsgi.wire.stream import artifact_update
from murmur_wsgi.wire.task import text_part

from tests.hub.conftest import HubClient, close_hub, refused_task
from tests.hub.retention_util import ended
from tests.hub.test_held_events import _begun
from tests.hub.test_held_events import _hub as counting_hub
from tests.hub.test_large_reads import BUSY, cramped_hub
from tests.hub.test_replay_pages import _payloads

MIB = 1024 ** 2


def _texts(events: list) -> list[str]:
    return [part["text"] for event in events if "artifactUpdate" in event.get("result", {})
            for part in event["result"]["artifactUpdate"]["artifact"]["parts"]]


@pytest.mark.cluster
def test_an_event_larger_than_a_page_is_read_once_the_worker_has_room(redis_server):
    """With the worker's room taken, a stream reaching an event larger than a page gets the
    events before it, then -32603 past its ``redis.timeout_secs``; with room, all of it."""
    hub = cramped_hub(redis_server)
    try:
        text = "y" * (2 * PAGE_BYTES)
        small = artifact_update("t", "ctx", {"artifactId": "a", "parts": [text_part("s")]})
        large = artifact_update("t", "ctx", {"artifactId": "b", "parts": [text_part(text)]})
        task = ended(hub.stores, events=[small, large])
        acme = HubClient(hub)
        with hub.store.large_reads.room(4 * MIB):
            events = _payloads(acme.call("SubscribeToTask", {"id": task.id}).get_data())
            assert _texts(events) == ["s"]                 # the events before it
            assert events[-1] == {"jsonrpc": "2.0", "id": acme.next_id,
                                  "error": {"code": -32603, "message": BUSY}}
        events = _payloads(acme.call("SubscribeToTask", {"id": task.id}).get_data())
        assert _texts(events) == ["s", text]
        assert events[-1]["result"]["statusUpdate"]["status"]["state"] == \
            "TASK_STATE_COMPLETED"
        assert hub.store.large_reads.held == 0             # given back: no reader waits
        assert hub.held.held() == 0
    finally:
        close_hub(hub)


def _event(seq: int, size: int) -> StoredEvent:
    return StoredEvent(seq, "z" * size, False)


def test_a_buffer_keeps_a_large_event_only_while_it_holds_room():
    room = LargeReads(4 * BUFFER_BYTES, wait_secs=0)
    buffers = [Watched(1, None) for _ in range(3)]
    for i, buffer in enumerate(buffers):
        buffer.merge(0, [_event(1, 100), _event(2, 2 * BUFFER_BYTES)])
        buffer.kept_within(room)
        if i < 2:                                       # room for two: each keeps its own
            assert [e.seq for e in buffer.entries] == [2] and buffer.large is not None
        else:                                           # none left: it keeps its place only
            assert buffer.entries == [] and buffer.large is None
            assert buffer.covers(2, 1) and not buffer.covers(1, 1)
            assert buffer.since(2) == []
    assert room.held == 4 * BUFFER_BYTES
    buffers[0].merge(2, [_event(3, 100)])               # a small one after it: let go
    buffers[0].kept_within(room)
    assert [e.seq for e in buffers[0].entries] == [3] and room.held == 2 * BUFFER_BYTES
    buffers[1].dropped(room)                            # no reader waits on it any more
    assert buffers[1].entries == [] and room.held == 0
    buffers[2].merge(2, [_event(3, 100)])               # contiguous with its place
    assert [e.seq for e in buffers[2].entries] == [3]
    small = Watched(1, None)
    small.merge(0, [_event(1, 100)])
    small.kept_within(None)                             # no room to hold: kept as any
    assert len(small.entries) == 1


def _running(hub) -> HubTask:
    message_id = uuid.uuid4().hex
    task = HubTask(str(uuid.uuid4()), "ctx", "acme", "echo", message_id,
                   {"messageId": message_id, "role": "ROLE_USER", "parts": [text_part("hi")]})
    hub.stores.tasks.create(task, task.task_event())
    hub.stores.tasks.start(task.id)
    return task


def _big(task, name: str) -> str:
    return artifact_update(task.id, "ctx", {"artifactId": name,
                                            "parts": [text_part(name * 3 * MIB)]})


def _kept_with_a_reader_waiting(hub, task, n: int):
    """The task's buffer keeping its large event ``n`` while a reader past it waits for the
    next on another thread (two streams of one task): (that thread, what it will get)."""
    store = hub.store
    read = store._read_events
    gate, entered, waiting = threading.Event(), threading.Event(), threading.Event()

    def gated(tenant, task_id, after, finished):
        if threading.current_thread().name != "past-it":
            return read(tenant, task_id, after, finished)
        if not gate.is_set():
            entered.set()
            gate.wait(10)
        try:
            return read(tenant, task_id, after, finished)
        finally:
            waiting.set()                   # its read done: it waits for the next event
    store._read_events = gated
    got: dict = {}

    def past_it():
        try:
            got["events"] = store.events(task.id, n, 10.0, tenant="acme")
        except Exception as ex:  # noqa: BLE001 - the test reads it
            got["error"] = ex
    thread = threading.Thread(target=past_it, name="past-it", daemon=True)
    thread.start()
    assert entered.wait(10)
    events, exists = store.events(task.id, n - 1, 5.0, tenant="acme")   # the other stream
    assert exists and [e.seq for e in events] == [n]
    assert store.conn.feed.room.held >= 3 * MIB                # kept, shared
    gate.set()
    assert waiting.wait(10)
    return thread, got


@pytest.mark.parametrize("lost", [False, True])
def test_a_buffers_large_event_takes_no_room_a_read_needs(redis_server, lost):
    """While a task's buffer keeps a large event (a stream waits on the task), the worker's
    reads have all their room: the task's next large event (the flight read of the very
    reader that waits), and another task's large record. Before, the kept copy held the
    reads' room: each waited ``redis.timeout_secs`` and was -32603. A buffer of a lost
    subscription (a new epoch) lets its large event go."""
    hub = cramped_hub(redis_server)
    try:
        task = _running(hub)
        assert hub.stores.tasks.append(task.id, _big(task, "a"))
        n = hub.store.last_position(task.id, "acme")
        thread, got = _kept_with_a_reader_waiting(hub, task, n)
        if lost:
            hub.store.conn.feed._set_epoch(False)      # as the listener's loss does
            assert hub.store.conn.feed.room.held == 0
        other = refused_task(hub, 2 * MIB)
        assert HubClient(hub).result("GetTask", {"id": other})["id"] == other
        assert hub.stores.tasks.append(task.id, _big(task, "b"))
        thread.join(10)
        assert "error" not in got, got
        assert [e.seq for e in got["events"][0]] == [n + 1]
    finally:
        close_hub(hub)


def test_a_stream_whose_log_expired_holds_its_task_counted(redis_server):
    """A finished task whose log expired before its record is streamed as its stored Task,
    rendered for each stream: a copy of its own, held counted as a large event."""
    redis_server.flush()
    hub = counting_hub(redis_server.url)
    try:
        task = ended(hub.stores, size=MIB)
        hub.store._redis.delete(events_key("acme", task.id))
        response, _, _ = _begun(HubClient(hub), task.id)
        assert hub.held.held("acme") > MIB
        response.close()
        assert hub.held.held() == 0
    finally:
        close_hub(hub)
