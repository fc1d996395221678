"""What the memory store holds of a finished task: its wire form, and its log's events
as their places in it where the form holds their text (``memory_logs.quoted``).

Before, a 1 MB text echoed by the demo was held four times: the task's wire form (its
message and its answer), its first event (its message) and its answer's final chunk (the
answer): what ``tasks.max_bytes_per_tenant`` counts of it, twice the wire form. Every
read still answers the same texts.
"""
from __future__ import annotations

import contextlib
import gc
import json
import tracemalloc

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.memory import MemoryTaskStore
from murmur_wsgi.hub.store.memory_logs import QUOTE_CHARS, quoted, text_of
from murmur_wsgi.hub.task import COMPLETED, HubTask, artifact_event_around
from murmur_wsgi.wire.task import text_part

from tests.hub.conftest import (HubClient, close_hub, hub_config, sse_events, wait_until,
                                 whole_log)

pytestmark = pytest.mark.one_store

MB = 1_000_000


def _send(rpc: HubClient, parts: list) -> str:
    return rpc.send("", parts=parts)["id"]


@contextlib.contextmanager
def _kept(parts: list, count: int):
    """A memory hub that has kept ``count`` finished tasks of ``parts`` (after one more,
    its tenant's first): ``(hub, rpc, the bytes Python holds more for them, traced, the
    bytes they count, their ids)``."""
    hub = create_hub(hub_config(store="memory"))
    rpc = HubClient(hub)
    try:
        _send(rpc, parts)
        wait_until(lambda: not hub.runs.in_flight())
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(count):
                _send(rpc, parts)
            wait_until(lambda: not hub.runs.in_flight())
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        finished = hub.store._finished["acme"]
        counted = sum(size for _, size in list(finished.values())[1:])
        yield hub, rpc, held, counted, list(finished)[1:]
    finally:
        close_hub(hub)


@pytest.mark.parametrize("parts", [
    [{"text": "x" * (MB // 4)} for _ in range(4)],
    [{"text": f"{i} " + "y" * 960} for i in range(1000)],
], ids=["four-parts", "many-parts"])
def test_a_finished_task_holds_its_wire_form_once(parts):
    with _kept(parts, 4) as (hub, rpc, held, counted, ids):
        store = hub.store
        wire = sum(len(store.task_json("acme", "echo", task_id)) for task_id in ids)
        # Before: 2.0 times its wire form (4.2 MB a task), all it counts.
        assert held < 1.1 * wire, f"{held / wire:.2f} times the wire form"
        assert counted > 1.9 * wire
        for task_id in ids:                    # its reads: the texts the run wrote
            events = sse_events(rpc.call("SubscribeToTask", {"id": task_id}))
            whole = json.loads(store.task_json("acme", "echo", task_id))
            assert events[0]["result"]["task"]["history"] == whole["history"]
            assert whole["history"][0]["parts"] == parts
            assert events[2]["result"]["artifactUpdate"]["artifact"] == whole["artifacts"][0]


def test_a_finished_task_of_wide_characters_holds_at_most_twice_its_bytes():
    """One character past U+FFFF makes Python keep every character of a text in 4 bytes,
    where its UTF-8 (what ``tasks.max_bytes_per_tenant`` counts) takes 1."""
    with _kept([{"text": "x" * MB + "\U0001F600"}], 3) as (_, _, held, counted, _):
        # Before: 4.0 times (16.7 MB a task for 4.2 MB counted).
        assert held < 2.1 * counted, f"{held / counted:.2f} times its bytes"


def _started(message: dict) -> tuple[MemoryTaskStore, HubTask]:
    """A memory store and its task of ``message``, running."""
    store = MemoryTaskStore()
    task = HubTask("t-1", "c", "acme", "echo", "m1", message)
    store.create(task, task.task_event())
    store.start(task.id)
    return store, task


def _answered(store: MemoryTaskStore, task: HubTask, answer: str) -> tuple[tuple, list]:
    """End ``task`` COMPLETED with ``answer`` as a run does (its final chunk in pieces
    around the answer's JSON): that chunk's pieces, and what the end wrote."""
    artifact = {"artifactId": "answer", "parts": [text_part(answer)]}
    encoded = json.dumps(artifact, separators=(",", ":"), ensure_ascii=False)
    pieces = artifact_event_around(task.id, task.context_id, encoded, False, True)
    return pieces, store.end(task.id, COMPLETED, None, [artifact], [pieces], answer=encoded)


def _ended(message: dict, turns: list, answer: str) -> tuple[MemoryTaskStore, HubTask, list]:
    """A task of ``message`` ended with ``answer`` (its history grown by ``turns`` as it
    ran): its store, the task and the payloads its log held at its end."""
    store, task = _started(message)
    with store.lock:
        if turns:
            store._tasks[task.id].history = [message, *turns]
    _answered(store, task, answer)
    return store, task, whole_log(store, task.id)


def _message(text: str, message_id: str = "m1") -> dict:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [text_part(text)]}


@pytest.mark.parametrize("turns", [[], [_message("z" * QUOTE_CHARS, "m2")]],
                         ids=["its-message", "grown-history"])
def test_a_long_first_event_and_answer_are_places_in_the_wire_form(turns):
    store, task, payloads = _ended(_message("é" * QUOTE_CHARS), turns, "ü" * QUOTE_CHARS)
    log = store._events[task.id]
    assert type(log[0]) is tuple and type(log[2]) is tuple      # places, not texts
    assert sum(len(piece) for piece in log[0] + log[2] if type(piece) is str) < 1000
    wire = store._tasks[task.id][10]
    assert [text_of(entry, wire) for entry in log] == payloads
    first = json.loads(payloads[0])["task"]
    assert first["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert first["history"] == [_message("é" * QUOTE_CHARS)]
    for after in range(len(payloads)):                          # every read, as before
        assert whole_log(store, task.id, after) == payloads[after:]
    assert store.final_event(task.id) == payloads[-1]


def test_an_event_the_wire_form_does_not_hold_is_kept_as_it_is():
    long = "h" * QUOTE_CHARS
    wire = '{"id":"t","status":{},"history":[' + long + 'X]}'
    arts_end = wire.index(',"history":')
    first = '{"task":{"id":"t","history":[' + long + 'Y]}}'    # one character differs
    near = '{"task":{"id":"t","history":[' + long[1:] + 'ZZ]}}'
    short = '{"task":{"id":"t","history":["a"]}}'
    answer = "a" * QUOTE_CHARS                                 # not in the wire form
    pieces = ("head", answer, "tail")
    log = (first, near, short, pieces, None)
    assert quoted(log, wire, arts_end, answer) == log
    kept = quoted(('{"task":{"id":"t","history":[' + long + 'X]}}',), wire, arts_end, None)
    assert kept[0][1:3] == (arts_end + len(',"history":'), len(wire) - 2)


def test_an_end_looks_at_its_first_event_and_its_own_not_at_every_event(monkeypatch):
    """The events between a finished task's first and those its end wrote are kept as
    they are, not looked at one by one under the store's lock: before, a look at each
    (quoting 300,000 streamed tokens took 35-39 ms at the end, 5-9 ms now)."""
    from murmur_wsgi.hub.store import memory_logs

    looked: list = []
    look = memory_logs._quoted_history
    monkeypatch.setattr(memory_logs, "_quoted_history",
                        lambda entry, *rest: looked.append(entry) or look(entry, *rest))
    store, task = _started(_message("é" * QUOTE_CHARS))
    for i in range(1000):
        store.append(task.id, json.dumps({"artifactUpdate": {"n": i}}))
    running = [event.payload for event in store.events(task.id, 0, 0)[0]]
    pieces, written = _answered(store, task, "ü" * QUOTE_CHARS)
    log = store._events[task.id]
    assert type(log[0]) is tuple and type(log[-2]) is tuple      # places, not texts
    assert whole_log(store, task.id) == [*running, "".join(pieces), written[-1]]
    assert len(looked) <= 3, f"{len(looked)} events looked at"
