"""The Redis store's one reader per worker (hub/store/redis_feed.py), on a real redis-server.

Events are written as the store's scripts write them: ``XADD ev:{id} <n>-1`` and, in the
same script, ``PUBLISH <channel> "<id> <n>"``. The feed's readers are threads waiting in
``events()``; the Redis commands they cost are read from ``INFO commandstats``.
"""
from __future__ import annotations

import os
import signal
import contextlib
import threading
import time

import pytest
import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from murmur_wsgi.hub.store.base import StoredEvent
from murmur_wsgi.hub.store.redis_client import connect
from murmur_wsgi.hub.store.redis_feed import EventFeed
from tests.hub.conftest import wait_until
from tests.redis_util import RedisServer

# NOTE: the fixture ``store`` here is this module's own, always on the session's
# redis-server: run once, not once per store of tests/hub/conftest.py.
pytestmark = pytest.mark.one_store

CHANNEL = "test:events"
WRITE = """
local n = redis.call('HINCRBY', KEYS[2], 'n', 1)
redis.call('XADD', KEYS[1], n .. '-1', 'p', ARGV[2], 't', ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[1] .. ' ' .. n)
return n
"""


def _key(task_id):
    return f"test:ev:{task_id}"


class Store:
    """What the store gives the feed: its client and a read of the events after a position."""

    def __init__(self, port, **settings):
        self.client = redis.Redis(port=port, decode_responses=True, socket_timeout=2,
                                  socket_connect_timeout=2, health_check_interval=0,
                                  **settings)
        self.reads = 0

    def read(self, task_id, after):
        self.reads += 1
        pipe = self.client.pipeline(transaction=False)
        pipe.xrange(_key(task_id), f"{after + 1}-0", "+")
        pipe.exists(_key(task_id))
        entries, exists = pipe.execute()
        return [StoredEvent(int(i.split("-")[0]), f["p"], f["t"] == "1")
                for i, f in entries], bool(exists), False        # never a page: all of it

    def write(self, task_id, payload, terminal=False):
        return self.client.eval(WRITE, 2, _key(task_id), f"test:n:{task_id}", task_id, payload,
                                "1" if terminal else "0", CHANNEL)


def commands(client) -> dict:
    return {name.removeprefix("cmdstat_"): stats["calls"]
            for name, stats in client.info("commandstats").items()}


@pytest.fixture
def store(redis_server):
    redis_server.flush()
    made = Store(redis_server.port)
    yield made
    made.client.close()


@contextlib.contextmanager
def running_feed(client, block_secs: float):
    """An ``EventFeed`` on ``client``, subscribed; closed as the store closes it."""
    made = EventFeed(client, CHANNEL, block_secs=block_secs)
    made.start()
    wait_until(lambda: made.subscribed)
    try:
        yield made
    finally:
        # NOTE: as the store closes it (redis_client.py): the pool's disconnect ends the
        # listener's wait for a message at once, not within block_secs.
        made.close()
        client.connection_pool.disconnect()
        made.close(wait=5)


@pytest.fixture
def feed(store):
    with running_feed(store.client, 0.5) as made:
        yield made
    assert not made._thread.is_alive()


class Reader(threading.Thread):
    """A stream: reads the task's events from the start until its final one."""

    def __init__(self, feed, read, task_id, timeout=0.5, deadline=20.0):
        super().__init__(daemon=True)
        self.feed, self.read, self.task_id, self.timeout = feed, read, task_id, timeout
        self.got: list = []
        self.calls = 0
        self.exists = None
        self.end = time.monotonic() + deadline

    def run(self):
        after = 0
        while time.monotonic() < self.end:
            self.calls += 1
            events, exists = self.feed.events(self.task_id, after, self.timeout, self.read)
            self.exists = exists
            if not exists:
                return
            if events:
                after = events[-1].seq
                self.got.extend(events)
                if events[-1].terminal:
                    return


def test_a_waiting_reader_gets_each_event_as_it_is_written(store, feed):
    store.write("t1", "one")
    reader = Reader(feed, store.read, "t1")
    reader.start()
    wait_until(lambda: len(reader.got) == 1)
    store.write("t1", "two")
    store.write("t1", "end", terminal=True)
    reader.join(10)
    assert [(e.seq, e.payload, e.terminal) for e in reader.got] == [
        (1, "one", False), (2, "two", False), (3, "end", True)]


def test_many_readers_of_one_task_cost_one_read_per_event(store, feed):
    store.write("t2", "first")
    readers = [Reader(feed, store.read, "t2", timeout=5.0) for _ in range(200)]
    for reader in readers:
        reader.start()
    wait_until(lambda: all(len(r.got) == 1 for r in readers))
    reads = store.reads
    for n in range(2, 12):
        store.write("t2", f"event {n}")
        wait_until(lambda n=n: all(len(r.got) == n for r in readers))
    store.write("t2", "end", terminal=True)
    for reader in readers:
        reader.join(10)
    assert all([e.seq for e in r.got] == list(range(1, 13)) for r in readers)
    # Eleven events after the readers were in: one read each for all two hundred.
    assert store.reads - reads == 11


@pytest.fixture
def own_server(tmp_path):
    """A redis-server of the test's own: what other tests left running on the session's
    (a hub's sweep, its heartbeat) would count in its ``INFO commandstats``."""
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


def test_idle_readers_cost_no_redis_command(own_server):
    store = Store(own_server.port)
    watcher = redis.Redis(port=own_server.port, decode_responses=True)
    try:
        with running_feed(store.client, 0.5) as feed:
            store.write("t3", "first")
            readers = [Reader(feed, store.read, "t3", timeout=0.4, deadline=1.5)
                       for _ in range(50)]
            for reader in readers:
                reader.start()
            wait_until(lambda: all(len(r.got) == 1 for r in readers))
            before = commands(watcher)
            started = time.monotonic()
            for reader in readers:
                reader.join(5)
            took = time.monotonic() - started
            after = commands(watcher)
    finally:
        watcher.close()
        store.client.close()
    assert all(r.calls >= 3 for r in readers)        # each waited, timed out and asked again
    spent = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    spent.pop("info", None)
    spent = {k: v for k, v in spent.items() if v}
    # The feed's own PING when it heard nothing for block_secs (0.5): one feed, not fifty.
    assert set(spent) <= {"ping"}
    assert spent.get("ping", 0) <= took / 0.5 + 1


def test_a_reader_behind_the_buffer_reads_its_own_way_in(store, feed):
    for n in range(1, 101):
        store.write("t4", f"e{n}")
    live = Reader(feed, store.read, "t4", timeout=2.0)
    live.start()
    wait_until(lambda: len(live.got) == 100)
    late, exists = feed.events("t4", 0, 0, store.read)            # the replay from the start
    assert exists and [e.seq for e in late] == list(range(1, 101))
    store.write("t4", "end", terminal=True)
    live.join(10)
    assert live.got[-1].terminal and len(live.got) == 101


def test_an_unknown_task_is_no_stream(store, feed):
    assert feed.events("nosuch", 0, 0.1, store.read) == ([], False)


def test_a_stalled_redis_ends_a_waiting_reader_with_an_error(tmp_path):
    """SIGSTOP: connections open, nothing answers. The listener's PING goes unanswered,
    the feed takes the channel for lost, and the reader's own read fails."""
    server = RedisServer(tmp_path).start()
    store = Store(server.port)
    store.client.close()
    store.client = connect(server.url, 0.5)        # the store's client: a timeout is final
    feed = EventFeed(store.client, CHANNEL, block_secs=0.3, stall_secs=0.5)
    feed.start()
    try:
        wait_until(lambda: feed.subscribed)
        store.write("t7", "first")
        assert [e.payload for e in feed.events("t7", 0, 0, store.read)[0]] == ["first"]
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(redis.RedisError):
                while time.monotonic() - started < 10:
                    feed.events("t7", 1, 5.0, store.read)
            assert time.monotonic() - started < 5
            assert not feed.subscribed
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        wait_until(lambda: feed.subscribed)
    finally:
        feed.close(wait=5)
        store.client.close()
        server.stop()


def test_close_wakes_every_reader(store, feed):
    store.write("t5", "first")
    reader = Reader(feed, store.read, "t5", timeout=30.0, deadline=60.0)
    reader.start()
    wait_until(lambda: len(reader.got) == 1)
    started = time.monotonic()
    feed.close()
    reader.join(5)
    assert not reader.is_alive() and time.monotonic() - started < 5
    assert reader.exists is False


def test_readers_follow_a_redis_restart(tmp_path):
    server = RedisServer(tmp_path, persist=True).start()
    # NOTE: redis-py's default retries back off for about 4 s in all before the feed's
    # subscription fails; these take half a second, and still outlast the restart.
    store = Store(server.port, retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 5))
    feed = EventFeed(store.client, CHANNEL, block_secs=0.3)
    feed.start()
    try:
        wait_until(lambda: feed.subscribed)
        store.write("t6", "before")
        reader = Reader(feed, store.read, "t6", timeout=0.3, deadline=30.0)
        reader.start()
        wait_until(lambda: len(reader.got) == 1)
        server.stop()
        wait_until(lambda: not feed.subscribed)
        server.start()
        store.write("t6", "after")                    # maybe before the feed is back
        wait_until(lambda: len(reader.got) == 2, timeout=20)
        wait_until(lambda: feed.subscribed, timeout=20)
        store.write("t6", "end", terminal=True)
        reader.join(20)
        assert [e.payload for e in reader.got] == ["before", "after", "end"]
    finally:
        feed.close(wait=5)
        store.client.close()
        server.stop()
