"""Announcements only for watched tasks: a task's events are published on the events
channel while some stream reads it (its record's watch mark), and to nobody otherwise.

On a real redis-server, through the store's own scripts; the channel is heard by a
plain subscriber of the test.
"""
from __future__ import annotations

import sys
import threading
import time
import uuid

import pytest

from murmur_wsgi.hub.store import redis_stores
from murmur_wsgi.hub.store.redis_events import REWATCH_SECS, WATCH_MS
from murmur_wsgi.hub.store.redis_keys import EVENTS, task_key
from murmur_wsgi.hub.task import COMPLETED, HubTask
from murmur_wsgi.wire.task import text_part

from tests.hub.conftest import wait_until


@pytest.fixture
def rstores(redis_server):
    redis_server.flush()
    found = redis_stores(redis_server.url, timeout_secs=2.0, replica_id="me")
    yield found
    found.close()


@pytest.fixture
def heard(redis_server):
    """Every message of the events channel, as a subscriber hears it."""
    pubsub = redis_server.client().pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(EVENTS)
    wait_until(lambda: redis_server.client().pubsub_numsub(EVENTS)[0][1] >= 1)

    def messages():
        found = []
        while (message := pubsub.get_message(timeout=0.05)) is not None:
            found.append(message["data"])
        return found
    yield messages
    pubsub.close()


def _opened(rstores) -> HubTask:
    task = HubTask(str(uuid.uuid4()), "ctx", "acme", "echo", uuid.uuid4().hex,
                   {"messageId": "m", "role": "ROLE_USER", "parts": [text_part("hi")]})
    assert rstores.tasks.open(task, task.task_event(), rstores.counters, 10, 100).started
    return task


def _reader(rstores, task_id, after):
    """A stream waiting in ``events`` after ``after``: (its thread, what it got)."""
    got = []
    thread = threading.Thread(target=lambda: got.append(
        rstores.tasks.events(task_id, after, 10.0)), daemon=True)
    thread.start()
    return thread, got


def test_a_task_no_stream_reads_announces_nothing(rstores, heard):
    task = _opened(rstores)
    rstores.tasks.append(task.id, '{"artifactUpdate":{}}')
    assert rstores.tasks.end(task.id, COMPLETED, None, None, []) is not None
    marker = _opened(rstores)                   # then a watched one: what came before it
    thread, got = _reader(rstores, marker.id, 2)
    wait_until(lambda: rstores.tasks.conn.feed.watching() == 1 and
               rstores.tasks._redis.hget(task_key("acme", marker.id), "w") is not None)
    rstores.tasks.append(marker.id, '{"artifactUpdate":{}}')
    thread.join(10)
    assert [e.seq for e in got[0][0]] == [3]
    messages = []
    wait_until(lambda: messages.extend(heard()) or messages)
    assert messages == [f"{marker.id} 3"]      # the unwatched task's 3 events: nothing


def test_a_stream_s_read_marks_its_task_until_the_mark_passes(rstores, heard):
    task = _opened(rstores)
    events, _ = rstores.tasks.events(task.id, 0, 0)
    assert [e.seq for e in events] == [1, 2]
    redis_ms = int(rstores.tasks._redis.time()[0]) * 1000
    mark = int(rstores.tasks._redis.hget(task_key("acme", task.id), "w"))
    assert redis_ms + WATCH_MS - 5_000 <= mark <= redis_ms + WATCH_MS + 5_000
    rstores.tasks.append(task.id, '{"artifactUpdate":{}}')
    messages = []
    wait_until(lambda: messages.extend(heard()) or messages)
    assert messages == [f"{task.id} 3"]
    rstores.tasks._redis.hset(task_key("acme", task.id), "w", redis_ms - 1)     # the mark passed
    rstores.tasks.append(task.id, '{"artifactUpdate":{}}')
    assert rstores.tasks.end(task.id, COMPLETED, None, None, []) is not None
    marker = _opened(rstores)
    rstores.tasks.events(marker.id, 0, 0)
    rstores.tasks.append(marker.id, '{"artifactUpdate":{}}')
    messages = []
    wait_until(lambda: messages.extend(heard()) or messages)
    assert messages == [f"{marker.id} 3"]


def test_the_replica_renews_the_mark_of_a_task_its_streams_still_read(rstores):
    task = _opened(rstores)
    thread, got = _reader(rstores, task.id, 2)
    feed = rstores.tasks.conn.feed
    wait_until(lambda: feed.reading() == [task.id])
    redis_ms = int(rstores.tasks._redis.time()[0]) * 1000
    rstores.tasks._redis.hset(task_key("acme", task.id), "w", redis_ms - 1)       # about to lapse
    rstores.tasks._marked[task.id] = ("acme", time.monotonic() - REWATCH_SECS)   # long ago
    rstores.tasks.keep_watching()
    assert int(rstores.tasks._redis.hget(task_key("acme", task.id), "w")) > redis_ms + WATCH_MS // 2
    rstores.tasks.append(task.id, '{"artifactUpdate":{}}')           # announced: read at once
    thread.join(10)
    assert [e.seq for e in got[0][0]] == [3]
    wait_until(lambda: not feed.reading())
    rstores.tasks.keep_watching()
    assert task.id not in rstores.tasks._marked                      # nobody reads it here


def test_reads_mark_a_task_once_a_minute_not_each_time(rstores, redis_server):
    task = _opened(rstores)
    client = redis_server.client()
    before = client.info("commandstats").get("cmdstat_hset", {}).get("calls", 0)
    for _ in range(5):
        rstores.tasks.events(task.id, 0, 0)
    after = client.info("commandstats").get("cmdstat_hset", {}).get("calls", 0)
    assert after - before == 1                                       # the first read's mark


def test_a_mark_is_never_a_record_of_its_own(rstores):
    """Watching a task that does not exist (or was forgotten) creates nothing."""
    rstores.tasks.events("no-such-task", 0, 0, tenant="acme")
    assert rstores.tasks._redis.exists(task_key("acme", "no-such-task")) == 0


def _frames_of(thread) -> list[str]:
    """The thread's Python frames, innermost first, as ``Class.function`` or ``function``."""
    frame, names = sys._current_frames()[thread.ident], []
    while frame is not None:
        code = frame.f_code
        names.append(getattr(code, "co_qualname", code.co_name))
        frame = frame.f_back
    return names


def test_a_waiting_stream_waits_in_two_frames_of_the_store(rstores):
    """MEMORY: the frames of a stream's wait are held by every idle stream (a greenlet's
    Python data stack stays as deep as its deepest call): the store's part of the wait is
    ``TaskEvents.events`` calling the feed's ``events``, which waits on its condition."""
    task = _opened(rstores)
    thread, got = _reader(rstores, task.id, 2)
    wait_until(lambda: "EventFeed.events" in _frames_of(thread)[:3])
    names = _frames_of(thread)
    at = names.index("EventFeed.events")
    assert names[at - 1:at + 2] == ["Condition.wait", "EventFeed.events",
                                    "TaskEvents.events"], names
    rstores.tasks.end(task.id, COMPLETED, None, [], [], answer="done")
    thread.join(10)
    assert got and got[0][1] is True
