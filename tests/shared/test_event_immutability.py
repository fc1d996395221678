"""An event is fixed once published: a copy of the agent's values, one text for every reader."""
from __future__ import annotations

import json
import threading

import pytest

from murmur_wsgi.door.tasks.frames import Deferred
from tests.agents_util import tmp_home
from tests.conftest import Rpc
from tests.sse_util import COMPLETED, DEADLINE, is_state, msg, open_stream, stream_door


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


def _watch_all(rpc):
    """A murmur.WatchSession replaying every held event up to the first completed task."""
    watch = open_stream(rpc, "murmur.WatchSession", {})
    events = watch.until(is_state(COMPLETED))
    watch.close()
    return events


def test_a_value_changed_after_the_call_and_a_non_json_value_never_reach_a_stream():
    errors = []

    def agent(ctx):
        step = {"step": 1, "seen": ["a"]}
        ctx.tool_call_started("count", step, "call_ok")
        step["step"] = 2
        step["seen"].append("b")
        try:
            ctx.tool_call_started("bad", {1, 2}, "call_bad")
        except TypeError as ex:
            errors.append(str(ex))
        try:
            ctx.artifact("count", "out", duration_ms=float("nan"))
        except ValueError as ex:
            errors.append(str(ex))
        return "done"

    door = stream_door(agent)
    rpc = Rpc(door)
    try:
        task = rpc.result("SendMessage", msg("go"))["task"]
        assert task["status"]["state"] == COMPLETED
        assert errors[0].startswith("frame 'tool-call-started', key 'input': not a JSON value")
        assert "set" in errors[0]
        # NaN is a float: refused as the field's type (an int) before its JSON is looked at.
        assert errors[1] == "artifact: duration_ms is int or None, not float"
        for events in (_watch_all(rpc), _watch_all(rpc)):          # replays, each whole
            calls = [e.frame for e in events if e.frame_name == "tool-call-started"]
            assert calls == [{"frame": "tool-call-started", "toolCallId": "call_ok",
                              "toolName": "count", "input": {"step": 1, "seen": ["a"]}}]
            assert not any(e.frame_name == "artifact" for e in events)
    finally:
        door.close()


def _race(event) -> list[str]:
    """Two readers build one unread event at the same moment; return both texts."""
    deferred = event._payload
    assert isinstance(deferred, Deferred)            # nobody has read it yet
    barrier = threading.Barrier(2, timeout=DEADLINE)
    build = deferred._build

    def both_inside(*args):
        barrier.wait()                               # each reader is building it now
        return build(*args)

    deferred._build = both_inside
    texts = []
    readers = [threading.Thread(target=lambda: texts.append(event.payload)) for _ in range(2)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(DEADLINE)
    assert len(texts) == 2
    return texts


def test_two_readers_building_an_event_at_once_see_one_message_id():
    def agent(ctx):
        ctx.thinking("hmm")
        ctx.progress("halfway")
        return "done"

    door = stream_door(agent)
    rpc = Rpc(door)
    try:
        task = rpc.result("SendMessage", msg("go"))["task"]
        ring = door.session.ring
        readers = [ring.reader(replay=True, replay_from=0) for _ in range(2)]
        first, second = (reader.next(0)[0] for reader in readers)
        assert [e.id for e in first] == [e.id for e in second]
        by_kind = {}
        for event in first:
            if event.task_id == task["id"] and not isinstance(event._payload, str):
                texts = _race(event)
                assert texts[0] == texts[1]
                by_kind[next(iter(json.loads(texts[0])))] = texts[0]
        # The thinking frame and the status with text: each has one messageId.
        assert "message" in by_kind and '"messageId":"msg_' in by_kind["message"]
        for reader in readers:
            reader.close()
    finally:
        door.close()
