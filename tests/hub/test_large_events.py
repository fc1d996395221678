"""A stream's event larger than a page of its log, on Redis: read once the worker has room
for it (``large_reads``), and kept in its task's buffer only while it holds room there.

Before, each stream opening on such an event (an artifact of many MiB) read a copy of its
own at once, however many opened, and each task its streams read kept its newest event
in the worker's buffer whatever its size, for as long as a stream waited on the task.
"""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.store.base import StoredEvent
from murmur_wsgi.hub.store.large_reads import LargeReads
from murmur_wsgi.hub.store.redis_feed import PAGE_BYTES
from murmur_wsgi.hub.store.redis_watched import BUFFER_BYTES, Watched
from murmur_wsgi.wire.stream import artifact_update
from murmur_wsgi.wire.task import text_part

from tests.hub.conftest import HubClient, close_hub
from tests.hub.retention_util import ended
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
