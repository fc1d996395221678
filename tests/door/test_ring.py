"""The session's event ring: ids, cursors, replay with gap, lagged readers, closing."""
from __future__ import annotations

import contextlib
import threading

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.door.tasks.ring import Event, EventRing, Gap, Lagged
from tests.conftest import Rpc, make_door
from tests.tasks_util import send_params

DEADLINE = 10.0


def fill(ring, count, task_id="tsk_a", frame=False):
    return [ring.publish(task_id, f'{{"n":{i}}}', frame=frame) for i in range(count)]


def ids(items):
    return [item.id for item in items if type(item) is Event]


def test_ids_start_at_one_and_rise_across_tasks():
    ring = EventRing(8)
    assert [ring.publish(t, "{}").id for t in ("tsk_a", "tsk_b", None, "tsk_a")] == [1, 2, 3, 4]
    assert ring.last_id == 4


def test_a_live_reader_sees_only_what_comes_after_it_opened():
    ring = EventRing(8)
    fill(ring, 3)
    reader = ring.reader()
    assert reader.next(0) == ([], False)
    fill(ring, 2)
    items, closed = reader.next(0)
    assert ids(items) == [4, 5] and not closed


def test_next_waits_for_a_publish_on_another_thread():
    ring = EventRing(8)
    reader = ring.reader()
    got = []
    thread = threading.Thread(target=lambda: got.append(reader.next(DEADLINE)))
    thread.start()
    ring.publish("tsk_a", "{}")
    thread.join(DEADLINE)
    assert not thread.is_alive()
    assert ids(got[0][0]) == [1]


def test_close_wakes_a_waiting_reader():
    ring = EventRing(8)
    reader = ring.reader()
    got = []
    thread = threading.Thread(target=lambda: got.append(reader.next(DEADLINE)))
    thread.start()
    ring.close()
    thread.join(DEADLINE)
    assert not thread.is_alive()
    assert got == [([], True)]


def test_a_timeout_with_nothing_new_answers_empty():
    ring = EventRing(8)
    assert ring.reader().next(0.001) == ([], False)


def test_task_reader_filters_and_frames_flag():
    ring = EventRing(16)
    reader = ring.reader(task_id="tsk_a", frames=False)
    ring.publish("tsk_a", "{}")
    ring.publish("tsk_b", "{}")
    ring.publish("tsk_a", "{}", frame=True)
    ring.publish("tsk_a", "{}", terminal=True)
    items, _ = reader.next(0)
    assert ids(items) == [1, 4]
    assert items[-1].terminal


@pytest.mark.parametrize("after, expect_gap, expect_ids", [
    pytest.param(0, False, [1, 2, 3, 4, 5], id="from-start"),
    pytest.param(3, False, [4, 5], id="after-3"),
    pytest.param(5, False, [], id="up-to-date"),
    pytest.param(6, True, [1, 2, 3, 4, 5], id="never-issued"),
])
def test_replay_without_wrap(after, expect_gap, expect_ids):
    ring = EventRing(8)
    fill(ring, 5)
    items, _ = ring.reader(replay=True, replay_from=after).next(0)
    assert (type(items[0]) is Gap if items else False) == expect_gap
    assert ids(items) == expect_ids


@pytest.mark.parametrize("after, expect_gap", [
    pytest.param(0, True, id="from-start"),
    pytest.param(11, True, id="oldest-minus-two"),
    pytest.param(12, False, id="oldest-minus-one"),
    pytest.param(15, False, id="inside"),
    pytest.param(99, True, id="never-issued"),
])
def test_replay_after_wrap(after, expect_gap):
    ring = EventRing(8)
    fill(ring, 20)             # holds 13..20
    items, _ = ring.reader(replay=True, replay_from=after).next(0)
    if expect_gap:
        assert type(items[0]) is Gap and items[0].first_available_id == 13
        assert ids(items) == list(range(13, 21))
    else:
        assert ids(items) == list(range(max(after, 12) + 1, 21))


def test_replay_of_an_empty_ring_is_nothing():
    ring = EventRing(8)
    assert ring.reader(replay=True, replay_from=41).next(0) == ([], False)


def test_replay_then_live_events_in_order():
    ring = EventRing(8)
    fill(ring, 3)
    reader = ring.reader(replay=True, replay_from=1)
    fill(ring, 2)
    assert ids(reader.next(0)[0]) == [2, 3]
    assert ids(reader.next(0)[0]) == [4, 5]


def test_a_slow_reader_is_told_how_many_it_missed():
    ring = EventRing(64, reader_queue=4)
    reader = ring.reader()
    fill(ring, 10)
    items, _ = reader.next(0)
    assert type(items[0]) is Lagged and items[0].missed == 6
    assert ids(items) == [7, 8, 9, 10]
    fill(ring, 2)
    assert ids(reader.next(0)[0]) == [11, 12]


def test_lagged_counts_events_no_longer_held():
    ring = EventRing(8, reader_queue=4)
    reader = ring.reader()
    fill(ring, 20)
    items, _ = reader.next(0)
    assert items[0].missed == 16 and ids(items) == [17, 18, 19, 20]
    assert ring.dropped == 16


def test_a_readers_queue_holds_its_own_events_only():
    ring = EventRing(64, reader_queue=4)
    reader = ring.reader(task_id="tsk_a")
    for i in range(10):
        ring.publish("tsk_a" if i % 2 else "tsk_b", "{}")
    items, _ = reader.next(0)
    assert items[0].missed == 1            # tsk_a's five events: the oldest, 2, fell out
    assert ids(items) == [4, 6, 8, 10]     # other tasks' events take no room in its queue


def test_writers_never_wait_and_memory_stays_bounded():
    ring = EventRing(16, reader_queue=4)
    readers = [ring.reader() for _ in range(10)]
    fill(ring, 5000)
    assert len(ring._slots) == 16
    assert all(len(r._pending) == 0 for r in readers)
    for reader in readers:
        reader.close()


def test_subscribers_count_and_close_is_idempotent_across_threads():
    ring = EventRing(8)
    readers = [ring.reader() for _ in range(50)]
    assert ring.subscribers == 50
    start = threading.Barrier(4)

    def close_all():
        start.wait(DEADLINE)
        for reader in readers:
            reader.close()

    threads = [threading.Thread(target=close_all) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
        assert not thread.is_alive()
    assert ring.subscribers == 0
    assert not any(r.open for r in readers)


def test_a_closed_ring_still_delivers_what_was_published():
    ring = EventRing(8)
    reader = ring.reader()
    fill(ring, 2)
    ring.close()
    items, closed = reader.next(DEADLINE)
    assert ids(items) == [1, 2] and closed


def test_the_ring_holds_its_events_within_max_bytes():
    # Bounded by count alone, the ring kept 512 events whatever their size: 300 tasks of a
    # 1 MB contextId and answer kept 256 MB in it after their tasks were evicted (770 MB
    # once a watcher had read them), up to 512 bodies' worth (32 GB at 64 MiB each).
    ring = EventRing(8, max_bytes=100)
    for i in range(3):
        ring.publish("tsk_a", "x" * 40)
    # 120 bytes past a bound of 100: the oldest went, ids go on.
    reader = ring.reader(replay=True, replay_from=0)
    items, _ = reader.next(0)
    assert type(items[0]) is Gap and items[0].first_available_id == 2
    assert ids(items) == [2, 3]
    # A live reader behind the shed events is told how many it missed.
    live = ring.reader()
    ring.publish("tsk_a", "y" * 90)
    ring.publish("tsk_a", "z" * 30)
    items, _ = live.next(0)
    assert type(items[0]) is Lagged and items[0].missed == 1
    assert ids(items) == [5]
    # One event larger than the bound alone stays, the newest.
    ring.publish("tsk_a", "w" * 500)
    items, _ = ring.reader(replay=True, replay_from=4).next(0)
    assert type(items[0]) is Gap and items[0].first_available_id == 6 and ids(items) == [6]


def test_a_door_replays_large_events_within_stream_replay_bytes():
    door = make_door(tasks={"keep_finished": 1}, stream={"replay_bytes": 300_000})
    try:
        rpc = Rpc(door)
        for i in range(10):
            task = rpc.result("SendMessage", send_params("x" * 50_000,
                                                         contextId=f"{i}-" + "c" * 50_000))
            assert task["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        items, _ = door.session.ring.reader(replay=True, replay_from=0, stream=False).next(0)
        assert type(items[0]) is Gap
        held = [item.payload for item in items if type(item) is Event]
        assert held and sum(map(len, held)) < 2 * 300_000
        assert f'"contextId":"9-' in held[-1]          # the newest are the ones kept
    finally:
        door.close()


def test_a_frames_lists_and_objects_count_toward_stream_replay_bytes():
    # A value's lists and objects counted nothing, only its strings and numbers: 100 frames
    # of a 0.9 MB JSON value of 300,000 empty lists kept 1.94 GB in the ring (of empty
    # objects, 2.2 GB), counted as 25 KB of its 64 MiB; 512 would keep about 10 GB. Here
    # each frame's 20,000 lists take about 1.3 MB: a 2 MiB ring keeps one or two of ten.
    width, count = 20_000, 10

    def agent(ctx):
        for _ in range(count):
            ctx.tool_call_started("t", [[]] * width)     # the door's copy: 20,000 lists
        return "done"
    with _replayed_calls(agent) as (items, calls, ring):
        assert type(items[0]) is Gap
        assert 1 <= len(calls) <= 2, len(calls)
        assert ring._bytes <= ring.max_bytes or len(calls) == 1
        assert calls[-1].payload.count("[]") == width      # the newest, read as it was


@contextlib.contextmanager
def _replayed_calls(agent):
    """``(items, the frames among them, the ring)`` of a 2 MiB ring replayed from the start,
    after one task of ``agent`` on a door with the tool ``t``."""
    door = create_app({"name": "frames", "version": "0.1.0", "tools": ["t"],
                       "stream": {"replay_bytes": 2 * 1024 ** 2}}, agent=agent)
    try:
        task = Rpc(door).result("SendMessage", send_params("go"))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        ring = door.session.ring
        reader, items = ring.reader(replay=True, replay_from=0, stream=False), []
        while batch := reader.next(0)[0]:       # the replay, in takes of stream.pending_bytes
            items += batch
        yield items, [item for item in items if type(item) is Event and item.frame], ring
    finally:
        door.close()


def test_a_frames_wide_characters_count_toward_stream_replay_bytes():
    # A string counted by its characters, where a text with one character outside the
    # basic plane holds 4 bytes each: ten frames of 200,000 such characters (8 MB held)
    # counted 2 MB, under a 2 MiB ring, and were all kept. By their memory the ring keeps
    # two or three of the ten.
    width, count = 200_000, 10

    def agent(ctx):
        for n in range(count):
            ctx.tool_call_started("t", {"text": str(n) + "\U0001F600" * width})
        return "done"
    with _replayed_calls(agent) as (items, calls, _):
        assert type(items[0]) is Gap
        assert 1 <= len(calls) <= 3, len(calls)
        assert '"text":"9' in calls[-1].payload             # the newest, kept
