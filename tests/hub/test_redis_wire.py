"""A finished task's wire form on Redis (hub/store/redis.py), against a real redis-server.

At its end a task's record keeps the Task as GetTask answers it (the field
``wire``), completed by the end's script from the pieces the record holds; its
history and artifacts are then kept only there. Each test builds the same task
in Python (``HubTask.to_json``, the encoder every other answer uses) and
compares the bytes.
"""
from __future__ import annotations

import json
import uuid

import pytest

from murmur_wsgi.hub.store import redis_commands, redis_stores
from murmur_wsgi.hub.store.redis_commands import PIECE_CHARS, Short
from murmur_wsgi.hub.store.redis_keys import task_key
from murmur_wsgi.hub.task import (CANCELED, COMPLETED, FAILED, REJECTED, HubTask,
                                  answer_artifact, artifact_event, artifact_event_around,
                                  data_part)
from murmur_wsgi.wire.encode import compact_utf8
from murmur_wsgi.wire.task import text_part

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

ODD = 'ünï "quoted" </script> \\ / \u2028 \U0001F600'     # escapes an encoder could differ on


@pytest.fixture
def redis_store(redis_server):
    redis_server.flush()
    found = redis_stores(redis_server.url, timeout_secs=2.0)
    yield found.tasks
    found.close()


def _new(store, text: str = "hi", state: str | None = None) -> HubTask:
    message_id = uuid.uuid4().hex
    task = HubTask(str(uuid.uuid4()), str(uuid.uuid4()), "acme", "echo", message_id,
                   {"messageId": message_id, "role": "ROLE_USER", "parts": [text_part(text)]})
    if state is not None:
        task.set_state(state, "refused: " + ODD)
    store.create(task, task.task_event(), bind=state is None)
    return task


def _record(store, task) -> dict:
    return store._redis.hgetall(task_key(task.tenant, task.id))


def _as_python_writes_it(task, record: dict, artifacts: list) -> str:
    """The task with the record's final status, serialized by ``HubTask.to_json``."""
    mirror = HubTask(task.id, task.context_id, task.tenant, task.agent, task.message_id,
                     task.history[0])
    mirror.state, mirror.status_ms = record["state"], int(record["ms"])
    mirror.status_text = json.loads(record["text"])
    mirror.artifacts = artifacts
    return mirror.to_json(cache=False)


ENDS = {
    "completed, an answer": (COMPLETED, None, [answer_artifact([text_part(ODD),
                                                                data_part({"n": 1})])]),
    "failed, artifacts kept (none)": (FAILED, "boom: " + ODD, None),
    "canceled, no artifacts": (CANCELED, None, []),
}


@pytest.mark.parametrize("started", [True, False], ids=["working", "submitted"])
@pytest.mark.parametrize("end", ENDS.values(), ids=ENDS.keys())
def test_the_stored_wire_form_is_the_task_as_python_writes_it(redis_store, end, started):
    state, text, artifacts = end
    task = _new(redis_store, ODD)
    if started:
        assert redis_store.start(task.id) is not None
    assert redis_store.end(task.id, state, text, artifacts, []) is not None
    record = _record(redis_store, task)
    expected = _as_python_writes_it(task, record, artifacts or [])
    assert record["wire"] == expected
    assert "hist" not in record and "arts" not in record          # one copy: the wire form
    assert redis_store.task_json("acme", "echo", task.id) == expected
    read = redis_store.get("acme", "echo", task.id)
    assert (read.history, read.artifacts) == (task.history, artifacts or [])
    trimmed = json.loads(expected)
    del trimmed["history"]                       # historyLength 0: rebuilt from the parts
    assert json.loads(redis_store.render(read, 0, as_read=True)) == trimmed


NAMED = {"artifactId": "notes", "name": "notes", "parts": [text_part(ODD)]}
ANSWERS = {"long, wide characters": ODD * 40_000, "long, ASCII": "chunk 1\n" * 100_000,
           "short": ODD}


@pytest.mark.parametrize("named", [[], [NAMED]], ids=["the answer alone", "and another"])
@pytest.mark.parametrize("text", ANSWERS.values(), ids=ANSWERS.keys())
def test_an_answer_sent_once_makes_the_same_wire_form_and_final_chunk(redis_store, named,
                                                                      text):
    """The run encodes its answer once and gives its final chunk as the text around it: the
    script writes both from that one argument, byte for byte as Python writes them."""
    task = _new(redis_store, ODD)
    redis_store.start(task.id)
    answer = answer_artifact([text_part(text), data_part({"n": 1, "t": ODD})])
    artifacts = named + [answer]
    encoded = compact_utf8(answer)
    chunk = artifact_event_around(task.id, task.context_id, encoded, append=False, last=True)
    written = redis_store.end(task.id, COMPLETED, None, artifacts, [chunk], answer=encoded)
    assert written[0] is chunk                      # the run's own stream writes it as it is
    record = _record(redis_store, task)
    assert record["wire"] == _as_python_writes_it(task, record, artifacts)
    stored = _logged(redis_store, task)
    assert [event.payload for event in stored[-2:]] == \
        [artifact_event(task.id, task.context_id, answer, False, True), written[1]]
    assert [event.terminal for event in stored[-3:]] == [False, False, True]


def _logged(redis_store, task) -> list:
    """The task's whole log, read a page at a time as its streams read it."""
    events, after, more = [], 0, True
    while more:
        page, _, more = redis_store._read_events(task.tenant, task.id, after)
        events += page
        after = events[-1].seq
    return events


def test_a_task_refused_at_its_creation_keeps_its_wire_form_too(redis_store):
    task = _new(redis_store, ODD, state=REJECTED)
    record = _record(redis_store, task)
    assert record["wire"] == task.to_json(cache=False)
    assert "hist" not in record and "arts" not in record
    assert redis_store.task_json("acme", "echo", task.id) == task.to_json(cache=False)


def test_another_tenant_or_agent_reads_nothing(redis_store):
    task = _new(redis_store)
    redis_store.end(task.id, COMPLETED, None, [answer_artifact([text_part("x")])], [])
    assert redis_store.task_json("acme", "echo", task.id) is not None
    assert redis_store.task_json("other", "echo", task.id) is None
    assert redis_store.task_json("acme", "other", task.id) is None
    assert redis_store.task_json("acme", "echo", "no-such-task") is None
    assert redis_store.task_json("acme", "echo", "x" * 300) is None


def test_a_running_task_is_rendered_from_its_record(redis_store):
    task = _new(redis_store, ODD)
    redis_store.start(task.id)
    record = _record(redis_store, task)
    assert "wire" not in record
    assert redis_store.task_json("acme", "echo", task.id) == \
        _as_python_writes_it(task, record, [])


def test_a_record_stored_without_a_wire_form_still_answers(redis_store):
    """A task a hub ended before finished tasks kept their wire form (hist and arts)."""
    artifacts = [answer_artifact([text_part(ODD)])]
    task = _new(redis_store, ODD)
    redis_store.end(task.id, COMPLETED, None, artifacts, [])
    key = task_key(task.tenant, task.id)
    expected = _record(redis_store, task)["wire"]
    redis_store._redis.hdel(key, "wire")
    redis_store._redis.hset(key, mapping={"hist": json.dumps(task.history, ensure_ascii=False),
                                          "arts": json.dumps(artifacts, ensure_ascii=False)})
    assert redis_store.task_json("acme", "echo", task.id) == expected
    page = redis_store.list("acme", "echo")
    assert [redis_store.render(t, as_read=True) for t in page.tasks] == [expected]


@pytest.mark.parametrize("size", [8, PIECE_CHARS + 1], ids=["short", "long"])
def test_a_script_call_said_short_has_no_long_argument(redis_server, redis_kind, size,
                                                       monkeypatch):
    """A message's OPEN and END say which calls are ``Short`` from the few arguments that
    can be long: none of such a call's is, and a call with a long one (a context id, a
    history, an answer, a status text, an event) is looked at whole, and sent in pieces."""
    redis_server.flush()
    found = redis_stores(redis_server.url, timeout_secs=2.0)
    sent = []

    def seen(commands):
        sent.extend(commands)
        return looked_at(commands)
    looked_at = redis_commands._any_long
    monkeypatch.setattr(redis_commands, "_any_long", seen)
    long = "x" * size
    in_open = {"context": True, "history": True}
    in_end = {"context": True, "answer": True, "status": True, "event": True}
    try:
        for where in ("context", "history", "answer", "status", "event"):
            sent.clear()
            text = long if where == "history" else "hi"
            task = HubTask(str(uuid.uuid4()), long if where == "context" else "ctx", "acme",
                           "echo", "m-" + where, {"messageId": "m-" + where,
                                                  "role": "ROLE_USER", "parts": [text_part(text)]})
            assert found.tasks.open(task, task.task_event(), found.counters, 5, 100).started
            answer = compact_utf8(answer_artifact([text_part(long if where == "answer"
                                                             else "hi")]))
            found.tasks.end(task.id, COMPLETED, long if where == "status" else None,
                            [answer_artifact([])], [long] if where == "event" else [],
                            answer=answer)
            opened, ended = [c for c in sent if c[0] == "EVALSHA"][-2:]
            for command, holds in ((opened, in_open.get(where)), (ended, in_end.get(where))):
                assert looked_at((tuple(command),)) == (size > PIECE_CHARS and bool(holds))
                if type(command) is Short:
                    assert not looked_at((tuple(command),))
                else:           # a cluster's calls are looked at whole, each of them
                    assert redis_kind == "cluster" or looked_at((tuple(command),))
    finally:
        found.close()
