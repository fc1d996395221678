"""A task's log is replayed in pages bounded in bytes, of events bounded in size: a stream
replaying a log of large events holds about a page of it, not most of the log.

An agent that streams faster than the merge (``events.merge_secs``) had all it wrote in
that time stored as one event (60 MiB in two), and a page of 64 events was most of a log
of large ones: each stream replaying it on Redis held its own copy (20 subscribers of a
60 MiB task: 2.1 GB of a worker's memory at its peak).
"""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.run_writes import STORED_CHARS
from murmur_wsgi.hub.store.redis_feed import PAGE_BYTES
from murmur_wsgi.wire.stream import artifact_update
from murmur_wsgi.wire.task import text_part

from tests.hub.conftest import HubClient, agent, close_hub, hub_config
from tests.hub.held_util import opened_holding
from tests.hub.test_replay_pages import _payloads, _replay_to
from tests.hub.retention_util import ended

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

TEXT_BYTES = 8 * STORED_CHARS             # what the agent streams, at once


@pytest.fixture
def flooding(store):
    config = hub_config(store=store)
    config["tenants"]["acme"]["agents"]["floods"] = agent("tests.hub.agents:floods")
    h = create_hub(config)
    yield HubClient(h, "floods")
    close_hub(h)


def test_text_streamed_faster_than_the_merge_is_stored_in_bounded_pieces(flooding):
    task = flooding.send(f"text {TEXT_BYTES // 4096} 4096")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    events = _payloads(flooding.call("SubscribeToTask", {"id": task["id"]}).get_data())
    texts = [part["text"] for event in events if "artifactUpdate" in event["result"]
             for part in event["result"]["artifactUpdate"]["artifact"]["parts"]
             if "text" in part]
    assert "".join(texts) == "f" * TEXT_BYTES + "flooded"     # the chunks, then the answer
    assert max(map(len, texts)) <= STORED_CHARS, [len(text) for text in texts]


def _large_events() -> list[str]:
    """64 artifact updates of a quarter of ``PAGE_BYTES`` each: a page of 64 was all of them."""
    return [artifact_update("t", "ctx", {"artifactId": "a", "parts": [
        text_part(f"{i:06d}" + "y" * (PAGE_BYTES // 4))]}, append=i > 0) for i in range(64)]


def test_a_read_of_a_log_of_large_events_stops_past_page_bytes(stores):
    logged = _large_events()
    task = ended(stores, events=logged)
    reads: list = []
    payloads = _replay_to(stores.tasks, task.id, stores.tasks.final_event(task.id), reads)
    assert payloads[2:] == logged + [stores.tasks.final_event(task.id)]   # once, in order
    if stores.shared:
        assert max(reads) <= 2 + 4 < len(logged), reads     # four events make a page


def test_streams_replaying_a_log_of_large_events_hold_about_a_page_each(hub):
    logged = _large_events()
    size = sum(map(len, logged))                        # 16 MiB
    task = ended(hub.stores, events=logged)
    rpc = HubClient(hub)
    responses, chunks, first, held = opened_holding(
        lambda: rpc.call("SubscribeToTask", {"id": task.id}), 4)
    for response in responses[1:]:
        response.close()
    # NOTE: on Redis a page of 64 such events was the whole log, held by each stream.
    assert held < size / 2, (held, size)
    events = _payloads(first[0] + b"".join(chunks[0]))
    responses[0].close()
    assert len([e for e in events if "artifactUpdate" in e["result"]]) == len(logged)
