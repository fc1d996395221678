"""The Redis stream feed (hub/store/redis_feed.py) hears what anyone with access to Redis
publishes on its channel: a message that is no ``<task id> <n>`` of an event written is
dropped, and readers are woken by the notifications after it; on a real redis-server."""
from __future__ import annotations

import threading

import pytest

from tests.hub.conftest import wait_until
from tests.hub.test_redis_feed import CHANNEL, running_feed, store  # noqa: F401

pytestmark = pytest.mark.one_store

MALFORMED = [b"garbage", b"k1 notanumber", b"k1 -1", b"", b"k1 " + b"9" * 5000,
             b"k1 100000000000000000000", b"k1 2 3", b" 5"]


def _waiting(feed, store, task_id, after, timeout):
    """A reader waiting in ``events`` after ``after``: (its thread, what it got)."""
    got = []
    thread = threading.Thread(target=lambda: got.append(
        feed.events(task_id, after, timeout, store.read)), daemon=True)
    thread.start()
    return thread, got


@pytest.mark.parametrize("payload", MALFORMED, ids=repr)
def test_a_malformed_notification_is_dropped_and_readers_still_wake(store, redis_server,
                                                                    payload):
    """A message no script sends (a number past the log, a negative one, none, more than
    int() takes) costs a waiting reader at most one read, and the next event written
    still reaches it through the channel."""
    raw = redis_server.client()
    with running_feed(store.client, 30.0) as feed:     # a paced read: only after 30 s
        store.write("k1", "first")
        store.write("k2", "first")
        for task_id in ("k1", "k2"):
            assert [e.seq for e in feed.events(task_id, 0, 0, store.read)[0]] == [1]
        epoch = feed._epoch
        raw.publish(CHANNEL, payload)
        store.write("k2", "marker")                    # heard after the payload
        wait_until(lambda: feed._watched["k2"].notified == 2)
        reads = store.reads
        # A second's wait with nothing new: a read at most, not one per round trip.
        assert feed.events("k1", 1, 1.0, store.read) == ([], True)
        idle = store.reads - reads
        assert idle <= 1, f"{idle} reads in a second's wait for nothing"
        thread, got = _waiting(feed, store, "k1", 1, 20.0)
        wait_until(lambda: feed._watched["k1"].readers == 1)
        store.write("k1", "second")                    # woken by its notification
        wait_until(lambda: got, timeout=15)
        thread.join(5)
        assert [e.payload for e in got[0][0]] == ["second"] and got[0][1]
        assert feed._thread.is_alive() and feed._epoch == epoch
        assert store.reads - reads - idle <= 2
    raw.close()
