"""The Redis stream feed (hub/store/redis_feed.py) through gaps: a subscription dropped and restored, a log gone behind a reader, a stream between two reads as the watches are renewed, a restart that lost an announced event; the other consumers of the channels (the replica's cancels, push's wake-ups) catching up after a resubscription; on a real redis-server."""
from __future__ import annotations

import threading
import time

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


# --- what the other consumers of the channels missed in a gap ------------------------------

def _dropped_with(client, *commands) -> None:
    """Redis drops every subscriber, then runs ``commands`` (``(name, *args)`` each, or a
    script's ``(script, keys, args)``) in the same transaction: what they PUBLISH reaches
    nobody (CLIENT KILL here; in production: the pubsub output-buffer limit, a proxy, a
    network reset, a restart)."""
    pipe = client.pipeline(transaction=True)
    pipe.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
    for command in commands:
        if callable(command[0]):
            script, keys, args = command
            script(keys=keys, args=args, client=pipe)
        else:
            pipe.execute_command(*command)
    pipe.execute()


def test_a_consumer_catches_up_after_each_resubscription_not_at_the_first(real):
    """The feed tells its consumers once it is subscribed again after a loss (a message of
    the gap reached nobody): not at its first subscription (an idle worker sends no command
    it did not send before), and on the listener's thread, in the order of its epochs."""
    told = []
    feed = EventFeed(real.client, CHANNEL, block_secs=0.3)
    feed.resubscribed(lambda: told.append((feed._epoch, threading.current_thread().name)))
    feed.start()
    try:
        wait_until(lambda: feed.subscribed)
        _dropped_with(real.client)
        wait_until(lambda: told and feed.subscribed)
        _dropped_with(real.client)
        wait_until(lambda: len(told) >= 2 and feed.subscribed)
    finally:
        feed.close()
        real.client.connection_pool.disconnect()
        feed.close(wait=5)
    # Epoch 1 is the first subscription: each later odd epoch one resubscription.
    assert [epoch for epoch, _ in told] == list(range(3, 3 + 2 * len(told), 2))
    assert {name for _, name in told} == {"hub-events"}


def test_a_cancel_published_while_the_channel_was_dropped_reaches_the_run_at_once(
        redis_server, monkeypatch):
    """Another replica cancels a run of this one (its mark, then its message on the cancel
    channel) while this replica's listener is between two subscriptions: the message reaches
    nobody. The replica's mark check (each tick, a second in production) is put a minute
    away here: only a look at the marks after the resubscription can cut the run in time."""
    from murmur_wsgi.hub import create_hub, replica
    from murmur_wsgi.hub.store import redis_keys
    from tests.hub.conftest import HubClient, close_hub, hub_config

    monkeypatch.setattr(replica, "TICK_SECS", 60.0)
    redis_server.flush()
    hub = create_hub(hub_config(store=redis_server.url, redis={"liveness_secs": 600.0}))
    assert hub.replica.tick == 60.0
    looked_from = []
    marks = hub.replica.store.cancel_marks

    def cancel_marks(runs):
        looked_from.append(threading.current_thread().name)
        return marks(runs)
    monkeypatch.setattr(hub.replica.store, "cancel_marks", cancel_marks)
    watcher = redis_server.client()
    try:
        client = HubClient(hub, "held")
        task = client.send("g-gap-cancel", configuration={"returnImmediately": True})
        wait_until(lambda: hub.runs.get(task["id"]) is not None)
        wait_until(lambda: hub.store.conn.feed.subscribed)
        _dropped_with(watcher,
                      ("SET", redis_keys.mark_key("acme", task["id"]), "1", "PX", 3_600_000),
                      ("PUBLISH", redis_keys.CHANNEL, task["id"]))
        wait_until(lambda: client.result("GetTask", {"id": task["id"]})["status"]["state"]
                   == "TASK_STATE_CANCELED", timeout=20)
        # One look per resubscription at most (one, unless redis-py's retry failed too), on
        # the replica's thread: the listener never waits for a command of it.
        resubscribed = (hub.store.conn.feed._epoch - 1) // 2
        assert set(looked_from) == {"hub-replica"}
        assert 1 <= len(looked_from) <= resubscribed, (looked_from, resubscribed)
    finally:
        watcher.close()
        close_hub(hub)


def test_a_config_released_while_the_channel_was_dropped_is_taken_at_once(
        redis_server, monkeypatch):
    """Another replica gives back a config's lease with events still due (its RELEASE, and
    its message on ``push:wake``) while this replica's listener is between two
    subscriptions: the message reaches nobody. The full look (every second in production)
    is put a minute away here: only a look after the resubscription finds the config."""
    from murmur_wsgi.hub.store import redis_push, redis_stores
    from murmur_wsgi.hub.store.redis_keys import PUSH_WAKE, lease_key, member, slots_key
    from tests.hub.test_push_storage import OWNERS, a_task, alive, record

    monkeypatch.setattr(redis_push, "FULL_SCAN_SECS", 60.0)
    redis_server.flush()
    watcher = redis_server.client()
    alive(watcher, *OWNERS)
    stores = redis_stores(redis_server.url, replica_id="me")
    push = stores.push
    found, waiter = [], None
    try:
        a_task(stores)
        saved = push.push_save(record(), from_start=True)
        assert push.push_lease(saved, "r1")                 # r1 (alive) delivers it
        assert push.push_due("me", 0) == []

        def dispatcher():
            """As the dispatcher's loop: due again until a config is."""
            deadline = time.monotonic() + 20
            while not found and time.monotonic() < deadline:
                found.extend(push.push_due("me", deadline - time.monotonic()))
        waiter = threading.Thread(target=dispatcher, daemon=True)
        waiter.start()
        wait_until(lambda: push._push_wait.full_at > 0)     # its full look is done: it waits
        wait_until(lambda: stores.push.conn.feed.subscribed)
        release = (push._scripts["RELEASE"],
                   [lease_key("acme", "t1", "c1"), slots_key("acme")],
                   ["r1", "t1/c1", PUSH_WAKE, member("acme", "t1", "c1")])
        _dropped_with(watcher, release)
        waiter.join(25)
        assert [r.key for r in found] == [("t1", "c1")]
    finally:
        if waiter is not None:
            waiter.join(25)
        watcher.close()
        stores.close()
