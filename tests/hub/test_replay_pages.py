"""A task's log replayed a page at a time (hub/store/redis_feed.py ``PAGE_EVENTS``): each
read of a long log takes a page, the streams that replay it hold no copy of it each, and
every reader still gets every event once, in order, the final one last."""
from __future__ import annotations

import json
import threading
import tracemalloc
import uuid

import pytest

from murmur_wsgi.hub.store import redis_stores
from murmur_wsgi.hub.store.redis_feed import PAGE_EVENTS
from murmur_wsgi.hub.task import COMPLETED, HubTask
from murmur_wsgi.wire.stream import artifact_update
from murmur_wsgi.wire.task import text_part

from tests.hub.conftest import HubClient
from tests.hub.retention_util import ended

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too


def test_readers_of_a_long_log_get_it_whole_in_order_a_page_per_read(stores):
    logged = [f"event {i}" for i in range(3 * PAGE_EVENTS + 5)]
    task = ended(stores, events=logged)
    final = stores.tasks.final_event(task.id)
    reads: list = []
    got: dict = {}
    readers = [threading.Thread(target=lambda k=k: got.__setitem__(
        k, _replay_to(stores.tasks, task.id, final, reads))) for k in range(3)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(30)
    assert len(got) == 3
    for payloads in got.values():
        assert payloads[2:] == logged + [final]     # after the task and its start, in order
    if stores.shared:
        assert max(reads) <= PAGE_EVENTS < len(logged)


def _replay_to(store, task_id: str, final: str, reads: list) -> list[str]:
    """Every payload of the task's log from the start, as a SubscribeToTask reads it (each
    read's number of events appended to ``reads``)."""
    after, payloads = 0, []
    while not payloads or payloads[-1] != final:
        events, available = store.events(task_id, after, 5.0)
        assert available and events, (after, len(payloads))
        reads.append(len(events))
        payloads.extend(event.payload for event in events)
        after = events[-1].seq
    return payloads


EVENTS, SIZE, STREAMS = 1000, 8192, 4


def _payloads(body: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in body.decode().split("\n")
            if line.startswith("data: ")]


def _long_task(store) -> tuple[HubTask, int]:
    """A finished task of ``EVENTS`` artifact updates of ``SIZE`` characters; its log's size."""
    message_id = uuid.uuid4().hex
    task = HubTask(str(uuid.uuid4()), "ctx", "acme", "echo", message_id,
                   {"messageId": message_id, "role": "ROLE_USER", "parts": [text_part("x")]})
    store.create(task, task.task_event())
    store.start(task.id)
    size = 0
    for i in range(EVENTS):
        event = artifact_update(task.id, "ctx", {"artifactId": "a", "parts": [
            text_part(f"{i:06d}" + "y" * SIZE)]}, append=i > 0)
        size += len(event)
        assert store.append(task.id, event)
    assert store.end(task.id, COMPLETED, None, None, []) is not None
    return task, size


def test_streams_replaying_a_long_log_hold_less_than_one_copy_of_it(hub):
    task, size = _long_task(hub.store)
    rpc = HubClient(hub)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        streams = [rpc.call("SubscribeToTask", {"id": task.id}) for _ in range(STREAMS)]
        chunks = [iter(response.response) for response in streams]
        first = [next(chunk) for chunk in chunks]          # each stream's first write
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    print(f"{STREAMS} streams of a {size / 2 ** 20:.1f} MiB log hold {held / 2 ** 20:.1f} MiB")
    for response in streams[1:]:
        response.close()
    # NOTE: the memory store's streams share its one copy; a Redis store's read a page each.
    assert held < size, (held, size)
    events = _payloads(first[0] + b"".join(chunks[0]))
    streams[0].close()
    texts = [e["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"][:6]
             for e in events if "artifactUpdate" in e["result"]]
    assert texts == [f"{i:06d}" for i in range(EVENTS)]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_stale_sweep_keeps_every_artifact_of_a_log_longer_than_a_page(redis_server):
    redis_server.flush()
    stores = redis_stores(redis_server.url, timeout_secs=2.0, replica_id="gone")
    try:
        message_id = uuid.uuid4().hex
        task = HubTask(str(uuid.uuid4()), "ctx", "acme", "echo", message_id,
                       {"messageId": message_id, "role": "ROLE_USER", "parts": [text_part("x")]})
        stores.tasks.create(task, task.task_event())     # a run of replica "gone"
        stores.tasks.start(task.id)
        names = [f"a{i}" for i in range(2 * PAGE_EVENTS + 3)]
        for name in names:
            assert stores.tasks.append(task.id, artifact_update(
                task.id, "ctx", {"artifactId": name, "parts": [text_part(name)]}))
        assert stores.replicas.sweep(0, "interrupted") == [task.id]   # "gone" is not alive
        swept = stores.tasks.get("acme", "echo", task.id)
        assert swept.state == "TASK_STATE_FAILED"
        assert [artifact["artifactId"] for artifact in swept.artifacts] == names
    finally:
        stores.close()
