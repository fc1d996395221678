"""The Redis stream feed (hub/store/redis_feed.py) through gaps: a subscription dropped and restored, a log gone behind a reader, a stream between two reads as the watches are renewed, a restart that lost an announced event; on a real redis-server."""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi.hub.store.redis_client import connect
from murmur_wsgi.hub.store.redis_feed import EventFeed
from tests.hub.conftest import wait_until
from tests.hub.test_redis_feed import CHANNEL, WRITE, Reader, Store, _key, running_feed

pytestmark = pytest.mark.one_store


@pytest.fixture
def real(redis_server):
    """A Store whose client is the hub's own (``connect``: one retry on a ConnectionError)."""
    redis_server.flush()
    made = Store(redis_server.port)
    made.client.close()
    made.client = connect(redis_server.url, 2.0)
    yield made
    made.client.close()
    made.client.connection_pool.disconnect()


@pytest.fixture
def real_feed(real):
    with running_feed(real.client, 0.3) as made:
        yield made


def test_an_event_published_while_the_subscription_was_dropped_still_reaches_the_stream(
        real, real_feed):
    """Redis drops the listener's connection (CLIENT KILL here; in production: the pubsub
    output-buffer limit, a proxy, a network reset) and redis-py's retry reconnects and
    re-subscribes at once. A PUBLISH in between reaches nobody. The feed must not take its
    buffers as covering what it may have missed."""
    real.write("k1", "first")
    reader = Reader(real_feed, real.read, "k1", timeout=0.3, deadline=30.0)
    reader.start()
    wait_until(lambda: len(reader.got) == 1)
    wait_until(lambda: real_feed._watched["k1"].last == 1)       # buffered: covered now
    # The subscriber dropped, then the task's final event written, in one step: its
    # PUBLISH finds no subscriber.
    pipe = real.client.pipeline(transaction=True)
    pipe.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
    pipe.eval(WRITE, 2, _key("k1"), "test:n:k1", "k1", "end", "1", CHANNEL)
    pipe.execute()
    wait_until(lambda: real.client.pubsub_numsub(CHANNEL)[0][1] == 1)   # re-subscribed
    wait_until(lambda: len(reader.got) == 2, timeout=5)
    assert reader.got[-1].terminal


def test_a_reader_behind_the_buffer_whose_log_vanished_returns(real, real_feed):
    """The log of a task goes (expired, forgotten by retention, evicted) after an event of it
    was announced and before any reader read it. A reader behind the buffer then reads for
    all, finds no log, and must answer ``([], False)`` (the stream ends with the stored task
    or -32603, streams.py ``_vanished``), not read again and again forever."""
    for n in range(1, 4):
        real.write("k2", f"e{n}")
    # One stream read all three (the buffer holds 1..3); another is still at 1.
    assert [e.seq for e in real_feed.events("k2", 0, 0, real.read)[0]] == [1, 2, 3]
    real.write("k2", "end", terminal=True)                     # announced: notified 4
    wait_until(lambda: real_feed._watched["k2"].notified == 4)
    real.client.delete(_key("k2"))                             # the log is gone
    reads_before = real.reads
    answer = []
    behind = threading.Thread(
        target=lambda: answer.append(real_feed.events("k2", 1, 1.0, real.read)), daemon=True)
    behind.start()
    returned = True
    try:
        wait_until(lambda: answer, timeout=5)
    except AssertionError:
        returned = False
    spun = real.reads - reads_before
    assert returned, f"events() did not return in 5 s (its timeout: 1 s); it read {spun} times"
    assert answer == [([], False)], spun
    assert spun <= 2


def _redis_ms(client) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def test_an_idle_stream_keeps_its_task_watched_through_a_gap_between_its_reads(
        redis_server, monkeypatch):
    """A SubscribeToTask stream is between two of its waits (writing a heartbeat, or a
    chunk) when the replica's tick renews the watches: the store forgets the task's mark
    (``keep_watching``) and never renews it again, though the stream reads on, trusting the
    feed's buffer. Once the watch lapses its task's events are announced to nobody: the
    stream never gets its final event. (WATCH_MS/REWATCH_SECS scaled down from 300 s/60 s.)"""
    from murmur_wsgi.hub import create_hub
    from murmur_wsgi.hub.store import redis_events
    from murmur_wsgi.hub.store.redis_keys import task_key
    from tests.hub.agents import gate
    from tests.hub.conftest import FAST, HubClient, close_hub, hub_config

    monkeypatch.setattr(redis_events, "WATCH_MS", 1000)
    monkeypatch.setattr(redis_events, "REWATCH_SECS", 0.2)
    redis_server.flush()
    hub = create_hub(hub_config(store=redis_server.url, redis=dict(FAST)))
    watcher = redis_server.client()
    try:
        client = HubClient(hub, "held")
        task = client.send("g-idle-watch", configuration={"returnImmediately": True})
        response = client.call("SubscribeToTask", {"id": task["id"]}, buffered=False)
        chunks = iter(response.response)
        first = next(chunks)                           # its first read: the task watched
        assert b'"task"' in first
        watched_until = int(watcher.hget(task_key("acme", task["id"]), "w"))
        # The stream is between two reads (here: the client has not asked for more yet)
        # while the replica's tick passes.
        hub.store.keep_watching()                      # the tick (the replica's, each second)
        rest = []
        reader = threading.Thread(target=lambda: rest.extend(chunks), daemon=True)
        reader.start()                                 # the stream waits for its next event
        wait_until(lambda: task["id"] in hub.store.conn.feed.reading())
        # Long enough for the watch its first read set to lapse unless it was renewed.
        wait_until(lambda: _redis_ms(watcher) > watched_until + 300)
        gate("g-idle-watch").set()
        wait_until(lambda: client.result("GetTask", {"id": task["id"]})["status"]["state"]
                   == "TASK_STATE_COMPLETED")
        wait_until(lambda: not reader.is_alive(), timeout=5)
        response.close()
        text = b"".join(rest)
        assert b"TASK_STATE_COMPLETED" in text
    finally:
        watcher.close()
        close_hub(hub)


def test_an_announced_event_a_restart_lost_does_not_make_readers_spin(tmp_path):
    """Redis restarts from its last snapshot (RDB, Redis's default persistence; or a
    failover to a replica that lagged): an event announced before it is gone. The feed's
    buffer of the old epoch is dropped, but what was announced in it is not: the task looks
    stale for ever, and every reader re-reads it in a loop with no pause until its deadline."""
    import os
    import signal

    from tests.redis_util import RedisServer

    server = RedisServer(tmp_path).start()                 # no AOF, no automatic save
    store = Store(server.port)
    store.client.close()
    store.client = connect(server.url, 2.0)
    feed = EventFeed(store.client, CHANNEL, block_secs=0.3)
    feed.start()
    try:
        wait_until(lambda: feed.subscribed)
        store.write("k3", "e1")
        store.write("k3", "e2")
        assert [e.seq for e in feed.events("k3", 0, 0, store.read)[0]] == [1, 2]
        store.client.save()                                # the snapshot: events 1 and 2
        store.write("k3", "e3")                            # announced, then lost
        wait_until(lambda: feed._watched["k3"].notified == 3)
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(10)
        wait_until(lambda: not feed.subscribed)
        server = RedisServer(tmp_path, port=server.port).start()    # loads the snapshot
        wait_until(lambda: feed.subscribed, timeout=20)
        assert store.client.xlen(_key("k3")) == 2
        before = store.reads
        assert feed.events("k3", 2, 1.0, store.read) == ([], True)
        # A second's wait with nothing new: a read or two, not one per round trip.
        assert store.reads - before <= 3, store.reads - before
    finally:
        feed.close(wait=5)
        store.client.close()
        server.stop()
