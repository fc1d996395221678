"""The Redis stream feed (hub/store/redis_feed.py) hears what anyone with access to Redis
publishes on its channel: a message that is no ``<task id> <n>`` of an event written, or
no UTF-8 at all, is dropped, and readers are woken by the notifications after it; on a
real redis-server."""
from __future__ import annotations

import logging
import threading

import pytest

from murmur_wsgi.hub.store import redis_feed
from murmur_wsgi.hub.store.redis_client import connect
from tests.hub.conftest import wait_until
from tests.hub.test_redis_feed import CHANNEL, running_feed, store  # noqa: F401

pytestmark = pytest.mark.one_store

MALFORMED = [b"garbage", b"k1 notanumber", b"k1 -1", b"", b"k1 " + b"9" * 5000,
             b"k1 100000000000000000000", b"k1 2 3", b" 5"]


def _woken_by_the_next_event(feed, store) -> None:
    """A reader of ``k1`` waiting after its first event gets its second through the
    channel: the feed's paced reads (``block_secs`` 30 here) come too late for the wait."""
    got = []
    thread = threading.Thread(target=lambda: got.append(
        feed.events("k1", 1, 20.0, store.read)), daemon=True)
    thread.start()
    wait_until(lambda: feed._watched["k1"].readers == 1)
    store.write("k1", "second")
    wait_until(lambda: got, timeout=15)
    thread.join(5)
    assert [e.payload for e in got[0][0]] == ["second"] and got[0][1]
    assert feed._thread.is_alive()


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
        # A wait with nothing new: a read at most, not one per round trip (a reader that
        # spun would read hundreds of times in it).
        assert feed.events("k1", 1, 0.3, store.read) == ([], True)
        idle = store.reads - reads
        assert idle <= 1, f"{idle} reads in a wait of 0.3 s for nothing"
        _woken_by_the_next_event(feed, store)
        assert feed._epoch == epoch
        assert store.reads - reads - idle <= 2
    raw.close()


def test_a_message_that_is_not_utf8_is_dropped_and_the_listener_goes_on(
        store, redis_server, monkeypatch, caplog):
    """redis-py drops the connection on a reply it cannot decode (and what came after it
    on the socket). That is no failure of Redis: the listener subscribes again at once,
    not after its pause between reconnects (here a minute), and readers are woken by the
    next notification, not by their paced reads (here half a minute apart)."""
    monkeypatch.setattr(redis_feed, "RECONNECT_SECS", 60.0)
    store.client.close()
    store.client = connect(redis_server.url, 2.0)       # the store's own client
    raw = redis_server.client()
    with running_feed(store.client, 30.0) as feed:
        store.write("k1", "first")
        assert [e.seq for e in feed.events("k1", 0, 0, store.read)[0]] == [1]
        epoch = feed._epoch
        with caplog.at_level(logging.WARNING, logger=redis_feed.__name__):
            raw.publish(CHANNEL, b"k1 \xff\xfe secret")
            wait_until(lambda: feed._epoch > epoch and feed.subscribed)
        assert any("not UTF-8" in r.getMessage() for r in caplog.records)
        assert "secret" not in caplog.text
        _woken_by_the_next_event(feed, store)
    raw.close()
