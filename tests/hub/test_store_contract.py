"""The store's parts (tasks, replicas, counters) on both stores: one contract, two implementations.

The fixture ``stores`` (tests/hub/conftest.py) runs every test here on the memory store
and on a real redis-server; push configs have theirs in test_push_storage.py.
"""
from __future__ import annotations

import json
import uuid

import pytest

from murmur_wsgi.hub.store import PENDING
from murmur_wsgi.hub.store.counters import CONCURRENCY, RATE
from murmur_wsgi.hub.task import (COMPLETED, FAILED, REJECTED, WORKING, HubTask,
                                  answer_artifact, artifact_event, artifact_event_around)
from murmur_wsgi.wire.encode import compact_utf8
from murmur_wsgi.wire.task import text_part

from tests.hub.conftest import whole_log

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

def new_task(stores, *, context_id="ctx", tenant="acme", agent="echo", state=None,
             message_id=None) -> HubTask:
    message_id = message_id or uuid.uuid4().hex
    task = HubTask(str(uuid.uuid4()), context_id, tenant, agent, message_id,
                   {"messageId": message_id, "role": "ROLE_USER", "parts": [text_part("hi")]})
    if state is not None:
        task.set_state(state, "refused")
    assert stores.tasks.claim_message(tenant, agent, message_id) is None
    stores.tasks.create(task, task.task_event(), bind=state is None)
    return task


# --- tasks ------------------------------------------------------------------------------


def test_a_claim_is_pending_then_names_its_task(stores):
    tasks = stores.tasks
    assert tasks.claim_message("acme", "echo", "m1") is None
    assert tasks.claim_message("acme", "echo", "m1") == PENDING
    tasks.release_message("acme", "echo", "m1")
    assert tasks.claim_message("acme", "echo", "m1") is None
    tasks.release_message("acme", "echo", "m1")
    task = new_task(stores, message_id="m1")
    assert tasks.claim_message("acme", "echo", "m1") == task.id
    assert tasks.claim_message("acme", "other", "m1") is None       # claims are per agent


def test_a_refused_task_frees_its_claim(stores):
    new_task(stores, state=REJECTED, message_id="m2")
    assert stores.tasks.claim_message("acme", "echo", "m2") is None


def test_a_task_is_its_tenants_and_agents_only(stores):
    task = new_task(stores)
    assert stores.tasks.get("acme", "echo", task.id).id == task.id
    assert stores.tasks.get("globex", "echo", task.id) is None
    assert stores.tasks.get("acme", "other", task.id) is None
    assert stores.tasks.get("acme", "echo", "no-such-task") is None
    assert stores.tasks.task_json("globex", "echo", task.id) is None


def test_a_task_ends_once_and_no_event_follows_its_end(stores):
    tasks = stores.tasks
    task = new_task(stores)
    assert json.loads(tasks.start(task.id))["statusUpdate"]["status"]["state"] == WORKING
    assert tasks.start(task.id) is None
    assert tasks.append(task.id, '{"artifactUpdate":{}}') is True
    written = tasks.end(task.id, COMPLETED, None, None, [])
    assert len(written) == 1
    assert tasks.end(task.id, FAILED, "late", None, []) is None
    assert tasks.append(task.id, '{"artifactUpdate":{}}') is False
    events, available = tasks.events(task.id, 0, 0)
    assert available and [e.seq for e in events] == [1, 2, 3, 4]
    assert [e.terminal for e in events] == [False, False, False, True]
    assert tasks.final_event(task.id) == written[-1]
    assert json.loads(tasks.task_json("acme", "echo", task.id))["status"]["state"] == COMPLETED


def test_a_numbered_event_sent_again_is_written_once(stores):
    """A run's event whose answer was lost is sent again under its number: the append,
    and the end that carries the events still kept, write each number once."""
    tasks = stores.tasks
    task = new_task(stores)
    tasks.start(task.id)
    assert tasks.append(task.id, '{"n":1}', 1) and tasks.append(task.id, '{"n":1}', 1)
    assert tasks.append(task.id, '{"n":2}', 2)
    assert tasks.append(task.id, '{"n":1}', 1)                  # late, and written already
    assert tasks.append(task.id, '{"plain":1}') and tasks.append(task.id, '{"plain":1}')
    written = tasks.end(task.id, COMPLETED, None, None, ['{"n":2}', '{"n":3}', '{"last":1}'],
                        (2, 2))
    assert written is not None
    payloads = [e.payload for e in tasks.events(task.id, 0, 0)[0]]
    assert payloads[2:-1] == ['{"n":1}', '{"n":2}', '{"plain":1}', '{"plain":1}', '{"n":3}',
                              '{"last":1}']


def test_an_answer_encoded_once_is_stored_as_if_given_whole(stores):
    """The run's final chunk in pieces around the answer it encoded once (``answer``): the
    events and the task as GetTask reads them are those of the answer given whole; a kept
    event before it still goes by its number."""
    tasks = stores.tasks
    task = new_task(stores)
    tasks.start(task.id)
    assert tasks.append(task.id, '{"n":1}', 1)
    answer = answer_artifact([text_part("chunk 1\nchunk 2 ü" * 30_000)])
    encoded = compact_utf8(answer)
    chunk = artifact_event_around(task.id, task.context_id, encoded, append=False, last=True)
    written = tasks.end(task.id, COMPLETED, None, [answer], ['{"n":1}', chunk], (1, 1),
                        encoded)
    whole = artifact_event(task.id, task.context_id, answer, False, True)
    assert [p if isinstance(p, str) else "".join(p) for p in written[1:-1]] == [whole]
    assert whole_log(tasks, task.id)[2:] == ['{"n":1}', whole, written[-1]]
    assert json.loads(tasks.task_json("acme", "echo", task.id))["artifacts"] == [answer]


def test_events_are_read_from_an_offset(stores):
    tasks = stores.tasks
    task = new_task(stores)
    tasks.start(task.id)
    events, available = tasks.events(task.id, 1, 0)
    assert available and [e.seq for e in events] == [2]
    assert tasks.events(task.id, 2, 0) == ([], True)
    assert tasks.has_events(task.id)
    assert tasks.events("no-such-task", 0, 0) == ([], False)


def test_a_cancel_mark_reaches_a_live_task_only(stores):
    live, done = new_task(stores), new_task(stores)
    stores.tasks.end(done.id, COMPLETED, None, None, [])
    stores.tasks.mark_cancel(live.id)
    stores.tasks.mark_cancel(done.id)
    assert stores.tasks.cancel_marked(live.id)
    assert not stores.tasks.cancel_marked(done.id)
    runs = [("acme", live.id), ("acme", done.id)]
    assert stores.replicas.cancel_marks(runs) == {live.id}


def test_a_listing_is_newest_first_and_pages_by_token(stores):
    made = [new_task(stores, context_id=f"c{i % 2}") for i in range(5)]
    page = stores.tasks.list("acme", "echo", page_size=2)
    assert [t.id for t in page.tasks] == [made[4].id, made[3].id] and page.total == 5
    second = stores.tasks.list("acme", "echo", page_size=2, token=page.next_token)
    assert [t.id for t in second.tasks] == [made[2].id, made[1].id]
    ctx = stores.tasks.list("acme", "echo", context_id="c0")
    assert [t.id for t in ctx.tasks] == [made[4].id, made[2].id, made[0].id] and not ctx.next_token
    turns = stores.tasks.context_tasks("acme", "echo", "c1", 5, 1 << 20)
    assert [t.id for t in turns] == [made[1].id, made[3].id]
    with pytest.raises(ValueError):
        stores.tasks.list("acme", "echo", token="not-a-token")


def test_a_contexts_turns_are_the_newest_within_max_bytes(stores):
    """Only the newest tasks whose stored forms fit ``max_bytes`` are read: one past it ends
    the turns (before, every one of the last 50 was read whole at each message, however
    large: 50 tasks of 1 MB artifacts, 50 MB read and decoded for one message)."""
    made = [new_task(stores, context_id="big") for _ in range(4)]
    ids = [t.id for t in made]
    assert [t.id for t in stores.tasks.context_tasks("acme", "echo", "big", 5, 1 << 20)] == ids
    assert stores.tasks.context_tasks("acme", "echo", "big", 5, 0) == []
    for task in made:                           # each then stored as its wire form alone
        stores.tasks.end(task.id, COMPLETED, None, None, [])
    sizes = [len(stores.tasks.get("acme", "echo", i).to_json().encode()) for i in ids]
    two = sizes[2] + sizes[3]
    assert [t.id for t in stores.tasks.context_tasks("acme", "echo", "big", 5, two)] == ids[2:]
    assert [t.id for t in stores.tasks.context_tasks("acme", "echo", "big", 5, two - 1)] == \
        ids[3:]


# --- replicas ---------------------------------------------------------------------------


def test_a_replica_sees_the_ended_ones_of_its_runs(stores):
    live, done = new_task(stores), new_task(stores)
    stores.tasks.end(done.id, COMPLETED, None, None, [])
    stores.replicas.heartbeat()
    ended = stores.replicas.ended_of([("acme", live.id), ("acme", done.id)])
    # One process ends its own runs; a shared store tells which another replica ended.
    assert ended == ({done.id} if stores.shared else set())
    assert stores.replicas.sweep(3600.0, "swept") == []          # nothing old, nobody dead


# --- counters ---------------------------------------------------------------------------


def test_counters_bound_runs_at_once_and_per_minute(stores):
    counters = stores.counters
    assert counters.take("t", "r1", 2, 3) is None
    assert counters.take("t", "r2", 2, 3) is None
    assert counters.take("t", "r3", 2, 3) == CONCURRENCY
    assert counters.running("t") == 2
    counters.give("t", "r1")
    assert counters.running("t") == 1
    assert counters.take("t", "r4", 2, 3) is None                 # the third token
    counters.give("t", "r4")
    assert counters.take("t", "r5", 2, 3) == RATE
    assert counters.running("other") == 0
    counters.renew([("t", "r2")])
    assert counters.running("t") == 1


# --- a message's acceptance in one step ----------------------------------------------------


def fresh_task(tenant="acme", message_id="m-open") -> HubTask:
    task = HubTask(str(uuid.uuid4()), "ctx", tenant, "echo", message_id,
                   {"messageId": message_id, "role": "ROLE_USER", "parts": [text_part("hi")]})
    return task


def test_open_claims_admits_stores_and_starts_a_task(stores):
    tasks, counters = stores.tasks, stores.counters
    task = fresh_task()
    opened = tasks.open(task, task.task_event(), counters, 5, 100)
    assert opened.found is None and opened.refused is None
    assert json.loads(opened.started)["statusUpdate"]["status"]["state"] == WORKING
    assert tasks.get("acme", "echo", task.id).state == WORKING
    events, _ = tasks.events(task.id, 0, 0)
    assert [json.loads(e.payload).popitem()[0] for e in events] == ["task", "statusUpdate"]
    assert json.loads(events[0].payload)["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert events[1].payload == opened.started
    assert counters.running("acme") == 1
    assert tasks.claim_message("acme", "echo", "m-open") == task.id
    page = tasks.list("acme", "echo", state=WORKING)
    assert [t.id for t in page.tasks] == [task.id]
    # The same messageId again: the task it names, nothing else done.
    again = fresh_task()
    assert tasks.open(again, again.task_event(), counters, 5, 100).found == task.id
    assert tasks.get("acme", "echo", again.id) is None
    assert counters.running("acme") == 1
    # Its end gives the slot back on shared counters (``ends_free``), else the caller does.
    assert tasks.end(task.id, COMPLETED, None, None, []) is not None
    if not counters.ends_free:
        counters.give("acme", task.id)
    assert counters.running("acme") == 0


def test_open_refused_stores_nothing_and_leaves_the_claim_free(stores):
    tasks, counters = stores.tasks, stores.counters
    first = fresh_task(tenant="t", message_id="a")
    assert tasks.open(first, first.task_event(), counters, 1, 100).started is not None
    second = fresh_task(tenant="t", message_id="b")
    opened = tasks.open(second, second.task_event(), counters, 1, 100)
    assert opened.refused == CONCURRENCY and opened.started is None
    assert tasks.get("t", "echo", second.id) is None
    assert tasks.claim_message("t", "echo", "b") is None            # free: claimed now
    tasks.release_message("t", "echo", "b")
    assert counters.running("t") == 1
    third = fresh_task(tenant="r", message_id="c")
    assert tasks.open(third, third.task_event(), counters, 5, 1).started is not None
    fourth = fresh_task(tenant="r", message_id="d")
    assert tasks.open(fourth, fourth.task_event(), counters, 5, 1).refused == RATE


def test_open_with_a_pending_claim_is_the_claimers_or_nobody_elses(stores):
    tasks, counters = stores.tasks, stores.counters
    assert tasks.claim_message("acme", "echo", "held") is None       # a hook runs meanwhile
    other = fresh_task(message_id="held")
    assert tasks.open(other, other.task_event(), counters, 5, 100).found == PENDING
    mine = fresh_task(message_id="held")
    assert tasks.open(mine, mine.task_event(), counters, 5, 100, claimed=True).started
    assert tasks.claim_message("acme", "echo", "held") == mine.id
    refused = fresh_task(message_id="held-2")
    assert tasks.claim_message("acme", "echo", "held-2") is None
    assert tasks.open(refused, refused.task_event(), counters, 1, 100,
                      claimed=True).refused == CONCURRENCY
    assert tasks.claim_message("acme", "echo", "held-2") is None     # released


def test_an_end_asked_to_keep_returns_the_finished_task_or_nothing(stores):
    tasks = stores.tasks
    task = fresh_task(message_id="kept")
    tasks.open(task, task.task_event(), stores.counters, 5, 100)
    written = tasks.end(task.id, COMPLETED, None, [answer_artifact([text_part("ok")])], [],
                        keep=True)
    stored = tasks.task_json("acme", "echo", task.id)
    # A store that builds the finished task's JSON returns it as GetTask answers it.
    assert getattr(written, "wire", None) in (None, stored)
    if stores.shared:
        assert written.wire == stored
    assert tasks.end(task.id, FAILED, None, None, [], keep=True) is None
