"""The memory store's finished tasks (and their push configs) and Python's garbage collector.

A tenant keeps up to ``tasks.max_per_tenant`` finished tasks (100,000 by default), and a
full collection walks every object the collector tracks with the worker stopped. A
finished task holds none once the collector has seen it, whatever it carried (data
parts, named and streamed artifacts, a context shared with others, a refusal), and
reads as it did before it finished: its wire forms, its history and artifacts, its
event log. Nor does a push config, up to ``MAX_CONFIGS_PER_TASK`` of each kept task.
"""
from __future__ import annotations

import copy
import gc
import itertools
import json
import sys

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store import memory_stores
from murmur_wsgi.hub.store.memory import MemoryTaskStore
from murmur_wsgi.hub.store.memory_logs import PIECES_CHARS
from murmur_wsgi.hub.store.push_base import MAX_CONFIGS_PER_TASK, PushRecord
from murmur_wsgi.hub.task import (COMPLETED, FAILED, REJECTED, WORKING, HubTask,
                                  answer_artifact, artifact_event_around)
from murmur_wsgi.wire.encode import compact_utf8
from murmur_wsgi.wire.task import data_part, text_part

from tests.hub.conftest import HubClient, close_hub, hub_config, wait_until, whole_log

AGENTS = ("echo", "named", "tokens", "data", "history", "rejects")


def _tracked() -> int:
    # NOTE: twice: what the first collection frees can leave more for the second.
    gc.collect()
    gc.collect()
    return len(gc.get_objects())


def _send(rpc: HubClient, agent: str, i: int) -> None:
    parts = [{"text": f"word {i} and more"}, {"data": {"n": i, "list": [1, 2, {"k": "v"}]}},
             {"text": "x", "metadata": {"tag": ["a", "b"]}}]
    rpc.result("SendMessage", {"message": {"messageId": f"{agent}-{i}", "role": "ROLE_USER",
                                           "contextId": f"ctx-{i % 5}", "parts": parts}},
               agent=agent)


def test_a_finished_task_holds_no_object_the_collector_tracks():
    hub = create_hub(hub_config(store="memory"))
    rpc = HubClient(hub)
    per_agent = 120
    try:
        for agent in AGENTS:          # each agent's and context's own entries first (two a
            for i in range(10):       # context: an index of one task is a tuple, then a list)
                _send(rpc, agent, -1 - i)
        wait_until(lambda: not hub.runs.in_flight())
        before = _tracked()
        for agent in AGENTS:
            for i in range(per_agent):
                _send(rpc, agent, i)
        wait_until(lambda: not hub.runs.in_flight())
        grown = _tracked() - before
        kept = hub.store.list("acme", "echo").total
        assert kept == 10 + per_agent
        tasks = per_agent * len(AGENTS)
        # Before: 16 objects a task (its lists and dicts, its events, a context's indexes).
        assert grown <= 100 + tasks // 20, f"{grown / tasks:.2f} tracked objects a task"
    finally:
        close_hub(hub)


def _rich_task(context_id: str = "c") -> HubTask:
    message = {"messageId": "m1", "role": "ROLE_USER", "contextId": context_id,
               "parts": [text_part("héllo"), data_part({"a": [1, {"b": None}]}),
                         {"text": "t", "metadata": {"k": ["v"]}}],
               "metadata": {"origin": ["x", {"y": 2.5}]}}
    task = HubTask("t-1", context_id, "acme", "echo", "m1", message)
    task.history = [message, {"messageId": "m0", "role": "ROLE_AGENT", "parts": [text_part("")]}]
    task.set_state(WORKING)
    task.set_artifacts([{"artifactId": "notes", "name": "notes", "parts": [text_part("n")]},
                        {"artifactId": "answer", "name": "answer",
                         "parts": [text_part("done"), data_part({"z": [True]})]}])
    task.set_state(COMPLETED, "all done")
    return task


def _refused_task() -> HubTask:
    task = HubTask('t-"2"\\', 'c-\u00e9-"q"\n', "acme", "echo", "m2",
                   {"messageId": "m2", "role": "ROLE_USER", "parts": [text_part("é\u2028")]})
    task.set_state(REJECTED, 'no "thanks"')
    return task


@pytest.mark.parametrize("history_length", [None, 0, 1, 2, 100])
@pytest.mark.parametrize("artifacts", [True, False])
@pytest.mark.parametrize("made", [_rich_task, _refused_task, lambda: _rich_task('c"é\\')])
def test_a_frozen_task_reads_as_it_did(history_length, artifacts, made):
    task = made()
    expected = (task.to_json(history_length, artifacts, cache=False),
                task.to_dict(history_length, artifacts), copy.deepcopy(task.history),
                copy.deepcopy(task.artifacts), task.to_json())
    task.freeze()
    assert (task.to_json(history_length, artifacts, cache=False),
            task.to_dict(history_length, artifacts), task.history, task.artifacts,
            task.to_json()) == expected
    assert task.whole() == json.loads(expected[-1])
    gc.collect()
    assert not gc.is_tracked(task.to_json())
    assert (task._history, task._artifacts) == (None, None)


def test_a_frozen_task_changes_no_more():
    task = _rich_task()
    task.freeze()
    with pytest.raises(RuntimeError, match="frozen"):
        task.set_state(FAILED, "late")
    assert task.state == COMPLETED and '"all done"' in task.to_json()


def _history_of(count: int) -> list:
    return [{"messageId": f"m{i}", "role": "ROLE_USER", "parts": [text_part(f"w{i}")]}
            for i in range(count)]


@pytest.mark.parametrize("count", [0, 1, 2, 3])
def test_a_task_keeps_the_last_history_length_turns_frozen_or_not(count):
    task = HubTask("t-3", "c", "acme", "echo", "m0", {"messageId": "m0"})
    task.history = _history_of(count)
    task.set_state(COMPLETED)
    for frozen in (False, True):
        if frozen:
            task.freeze()
        for history_length in range(6):
            want = _history_of(count)[max(0, count - history_length):]
            got = task.to_dict(history_length)
            assert got.get("history", []) == want, (frozen, history_length)
            assert json.loads(task.to_json(history_length, cache=False)) == got


def _contents_frozen_at(step: int, task: HubTask) -> tuple[tuple, bool]:
    """``task.contents()``, the task frozen (as the run's end on another thread does) before
    the ``step``-th bytecode of ``contents`` runs; and whether that step was reached."""
    code, seen, fired = HubTask.contents.__code__, [0], [False]

    def each_opcode(frame, event, arg):
        if event == "opcode":
            if seen[0] == step:
                fired[0] = True
                task.freeze()
            seen[0] += 1
        return each_opcode

    def tracer(frame, event, arg):
        if frame.f_code is not code:
            return None
        frame.f_trace_opcodes = True
        return each_opcode

    sys.settrace(tracer)
    try:
        got = task.contents()
    finally:
        sys.settrace(None)
    return got, fired[0]


def test_a_task_read_while_it_freezes_reads_whole():
    # A reader outside the store's lock (a message reading its context's turns) meets a
    # task as the run's end freezes it, between any two steps of its read.
    for step in itertools.count():
        task = _rich_task()
        want = (copy.deepcopy(task.history), copy.deepcopy(task.artifacts))
        got, reached = _contents_frozen_at(step, task)
        assert got == want, f"frozen before step {step}"
        if not reached:
            break
    assert step > 3


def test_a_finished_task_is_kept_as_its_record():
    store = MemoryTaskStore()
    task = _rich_task()
    assert task.terminal
    store.create(task, task.task_event(), bind=False)
    kept = store._tasks[task.id]
    gc.collect()
    assert type(kept) is tuple and not gc.is_tracked(kept)
    got = store.get("acme", "echo", task.id)
    assert got is not task and got.to_json() == task.to_json()
    assert (got.id, got.context_id, got.state, got.status_text, got.status_ms, got.seq) == \
        (task.id, task.context_id, task.state, task.status_text, task.status_ms, task.seq)
    assert got.contents() == (task.history, task.artifacts)
    assert store.task_json("acme", "echo", task.id) == task.to_json()
    assert store.get("acme", "other", task.id) is None and store.get("x", "echo", task.id) is None
    assert store.task_json("acme", "other", task.id) is None
    assert store.task_json("x", "echo", task.id) is None
    assert [t.to_json() for t in store.list("acme", "echo").tasks] == [task.to_json()]
    assert [t.id for t in store.context_tasks("acme", "echo", "c", 5, 1 << 20)] == [task.id]


def test_a_finished_log_reads_as_it_did():
    store = MemoryTaskStore()
    task = HubTask("t-2", "c", "acme", "echo", "m2",
                   {"messageId": "m2", "role": "ROLE_USER", "parts": [text_part("hi")]})
    store.create(task, task.task_event())
    started = store.start(task.id)
    assert store.append(task.id, '{"artifactUpdate":{}}')
    running, _ = store.events(task.id, 0, 0)
    written = store.end(task.id, COMPLETED, None, [], ['{"artifactUpdate":{"n":2}}'])
    assert running[1].payload == started
    assert type(store._events[task.id]) is tuple and store.log_locked(task.id) == (5, True)
    for after in range(6):
        events, alive = store.events(task.id, after, 0)
        assert alive
        assert [(e.seq, e.payload, e.terminal) for e in events] == [
            (n, p, n == 5) for n, p in
            enumerate([e.payload for e in running] + written, start=1)][after:]


def test_a_long_final_chunk_in_pieces_reads_as_its_text():
    """An end's event given in pieces around the answer's JSON (``answer``): a long one is
    kept as its pieces around the answer's place in the task's wire form, and read as the
    text they join to, at every read (no text kept); the task's bytes are counted the
    same."""
    store = MemoryTaskStore()
    long, short = "x" * PIECES_CHARS, "short"
    for text in (long, short):
        task = HubTask(f"t-{len(text)}", "c", "acme", "echo", f"m-{len(text)}",
                       {"messageId": "m", "role": "ROLE_USER", "parts": [text_part("hi")]})
        store.create(task, task.task_event())
        store.start(task.id)
        artifacts = [answer_artifact([text_part(text)])]
        encoded = compact_utf8(artifacts[-1])
        pieces = artifact_event_around(task.id, "c", encoded, append=False, last=True)
        written = store.end(task.id, COMPLETED, None, artifacts, [pieces], answer=encoded)
        assert written[0] == (pieces if text is long else "".join(pieces))
        kept = store._events[task.id][2]
        if text is long:
            start = store._tasks[task.id][10].index(encoded)
            assert kept == (pieces[0], start, start + len(encoded), pieces[2])
        else:
            assert kept == written[0]
        expected = compact_utf8(dict(json.loads(task.task_event())["task"],
                                     status=json.loads(store.render(task))["status"],
                                     artifacts=artifacts))
        assert store.render(task) == expected
        size = store._finished["acme"][task.id][1]
        assert size == len(expected) + sum(map(len, whole_log(store, task.id)))
        assert whole_log(store, task.id, 2) == ["".join(pieces), written[1]]
        assert store._events[task.id][2] == kept


def test_a_push_config_holds_no_object_the_collector_tracks():
    stores = memory_stores()
    tasks = [_finished_on(stores.tasks, i) for i in range(300)]
    before = _tracked()
    for task in tasks:
        for k in range(MAX_CONFIGS_PER_TASK):
            stores.push.push_save(PushRecord("acme", "echo", task.id, f"cfg-{k}",
                                             f"https://hooks.test/{k}", "t"), from_start=False)
    grown = _tracked() - before
    configs = len(tasks) * MAX_CONFIGS_PER_TASK
    # Before: 1.1 a config (its record, and a dict per task).
    assert grown <= 100, f"{grown / configs:.2f} tracked objects a config"
    listed = stores.push.push_list("acme", "echo", tasks[0].id)
    assert [r.id for r in listed] == [f"cfg-{k}" for k in range(MAX_CONFIGS_PER_TASK)]
    assert stores.push.push_get("acme", "echo", tasks[0].id, "cfg-3") == listed[3]
    assert stores.push.push_get("acme", "other", tasks[0].id, "cfg-3") is None
    assert stores.push.push_delete("acme", "echo", tasks[0].id, "cfg-3")
    assert [r.id for r in stores.push.push_list("acme", "echo", tasks[0].id)] == \
        [f"cfg-{k}" for k in range(MAX_CONFIGS_PER_TASK) if k != 3]
    stores.tasks._forget_locked(tasks[1].id)
    assert stores.push.push_list("acme", "echo", tasks[1].id) == []
    assert not any(key[0] == tasks[1].id for key in stores.push._push)


def _finished_on(store, i: int) -> HubTask:
    task = HubTask(f"t-{i}", f"c-{i}", "acme", "echo", f"m-{i}",
                   {"messageId": f"m-{i}", "role": "ROLE_USER", "parts": [text_part("hi")]})
    store.create(task, task.task_event())
    store.end(task.id, COMPLETED, None, None, [])
    return task
