"""A SubscribeToTask stream's large event read off Redis is held counted while the stream
writes it (hub/held.py ``HeldAnswers.event``): a tenant's streams at most
``limits.answer_bytes`` of them on a worker, every tenant's ``limits.worker_answer_bytes``;
one more past either ends its stream with -32603, and a written or closed stream gives its
event back.

A stream reads its task's log a page at a time, but an event larger than a page whole:
before, every stream stalled in a large event (an artifact of many MiB, a task of a large
message) held a copy of its own, uncounted (ten streams stalled in a 6 MiB artifact held
61 MiB of one worker). The memory store's streams quote the events it keeps, but a
finished task's event made for each read (a refused task's Task, rendered from its wire
form; a long event kept as its place in that form) is a copy, held counted too.
"""
from __future__ import annotations

import json

from murmur_wsgi.hub import create_hub

from tests.hub.conftest import KEY_B, HubClient, close_hub, hub_config, refused_task

MIB = 1024 ** 2


def _hub(store: str):
    config = hub_config(store=store)
    config["limits"] = {**config["limits"], "answer_bytes": 3 * MIB,
                        "worker_answer_bytes": 4 * MIB}
    config["tenants"]["globex"]["limits"]["max_subscriptions"] = 3
    return create_hub(config)


def _events(chunks) -> list[dict]:
    text = b"".join(chunks).decode()
    return [json.loads(line[len("data: "):]) for line in text.split("\n")
            if line.startswith("data: ")]


def _refused(chunks, setting: str, request_id: int) -> None:
    assert _events(chunks) == [{"jsonrpc": "2.0", "id": request_id, "error": {
        "code": -32603, "message": f"Internal error: this worker holds as many large answers "
        f"as it may ({setting}) for clients still reading them; try again once they are "
        "read"}}]


def _begun(rpc, task_id: str):
    """A SubscribeToTask stream of ``task_id``, its first chunk read: (response, its chunks'
    iterator, [that chunk])."""
    response = rpc.call("SubscribeToTask", {"id": task_id}, buffered=False)
    chunks = iter(response.response)
    return response, chunks, [next(chunks)]


def test_a_streams_large_event_is_held_counted_until_written(store):
    hub = _hub(store)
    try:
        acme, globex = HubClient(hub), HubClient(hub, headers={"X-API-Key": KEY_B})
        mine = [refused_task(hub, MIB) for _ in range(3)]
        theirs = [refused_task(hub, MIB, "globex") for _ in range(2)]
        streams = [_begun(acme, mine[0]), _begun(acme, mine[1]), _begun(globex, theirs[0])]
        # Before, on the memory store: nothing held, the rendered Tasks uncounted.
        assert hub.held.held("acme") > 2 * MIB and hub.held.held("globex") > MIB
        if hub.store.shared:
            held = hub.held.held()
            streams.append(_begun(acme, mine[0]))     # the same event, read once for both
            assert hub.held.held() == held
        third = acme.call("SubscribeToTask", {"id": mine[2]}, buffered=False)
        _refused(third.response, "limits.answer_bytes", acme.next_id)
        fourth = globex.call("SubscribeToTask", {"id": theirs[1]}, buffered=False)
        _refused(fourth.response, "limits.worker_answer_bytes", globex.next_id)
        response, chunks, first = streams.pop(0)
        events = _events(first + list(chunks))           # read to its end: its Task
        response.close()
        assert [event["result"]["task"]["id"] for event in events] == [mine[0]]
        assert events[0]["result"]["task"]["history"][0]["parts"][0]["text"] == "x" * MIB
        for response, _, _ in streams:                    # closed unread: given back
            response.close()
        assert hub.held.held() == 0
        again = acme.call("SubscribeToTask", {"id": mine[2]}, buffered=False)
        assert [e["result"]["task"]["id"] for e in _events(again.response)] == [mine[2]]
        again.close()
        assert hub.held.held() == 0
    finally:
        close_hub(hub)


class _WatchedLog(list):
    """A running task's log that counts the entries a look through it reads."""

    looked = 0

    def __iter__(self):
        for entry in super().__iter__():
            self.looked += 1
            yield entry


def test_a_streams_large_events_are_told_kept_by_their_own_entries():
    """The memory store tells a stream's large event it keeps (uncounted) by its entry at
    its position: before, by a look through the log up to it, under the store's lock, for
    each large event of each stream's read (36 ms an event after 100,000 others; a task
    of many tokens and large artifacts made each stream's read quadratic)."""
    from murmur_wsgi.hub.held import HeldAnswers
    from murmur_wsgi.hub.methods.streams import EventSource
    from murmur_wsgi.hub.store.memory import MemoryTaskStore
    from murmur_wsgi.hub.task import HubTask

    store, held = MemoryTaskStore(), HeldAnswers(64 * MIB)
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    task = HubTask("t-1", "c", "acme", "echo", "m1", message)
    store.create(task, task.task_event())
    store.start(task.id)
    with store.lock:
        log = store._events[task.id] = _WatchedLog(store._events[task.id])
    for i in range(2000):
        store.append(task.id, json.dumps({"statusUpdate": {"n": i}}))
    large = [json.dumps({"artifactUpdate": {"n": i, "text": "x" * 300_000}}) for i in range(5)]
    for payload in large:
        store.append(task.id, payload)
    source = EventSource(store, task, lambda payload: held.event(payload, "acme", 64 * MIB))
    read: list = []
    while len(read) < len(log):
        read.extend(source.read(0)[0])
        assert held.held("acme") == 0           # the store's own texts: none counted
    source.close()
    assert read[-5:] == large
    assert log.looked == 0, f"{log.looked} entries looked at for 5 large events"


def test_a_stream_of_a_finished_task_holds_no_made_event_uncounted():
    """A read of a finished task's log on the memory store brings at most one event made
    for it, its first: before, the task's answer, made at the stream's first read with its
    message, waited uncounted behind it while a client read the message slowly (three
    stalled streams of a 0.9 MB echo held 5.6 MB for 2.8 MB counted)."""
    import gc
    import tracemalloc

    hub = _hub("memory")
    try:
        rpc = HubClient(hub)
        task_id = rpc.send("x" * 900_000)["id"]
        first = hub.store.events(task_id, 0, 0)[0]
        assert [event.seq for event in first] == [1, 2]        # up to the answer, made next
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            streams = [_begun(rpc, task_id) for _ in range(3)]
            kept = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        counted = hub.held.held("acme")
        assert counted > 2_700_000                  # each stream's message, being written
        assert kept < 1.2 * counted, f"{kept} bytes kept for {counted} counted"
        for response, chunks, read in streams:
            read.extend(chunks)
            response.close()
            events = _events(read)
            assert events[0]["result"]["task"]["history"][0]["parts"][0]["text"] == \
                "x" * 900_000
            assert events[2]["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"] == \
                "x" * 900_000
        assert hub.held.held() == 0
    finally:
        close_hub(hub)
