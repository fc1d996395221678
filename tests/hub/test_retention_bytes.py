"""Retention by bytes (``tasks.max_bytes_per_tenant``) on every store: past a tenant's bytes
its oldest finished go first, and on Redis the tenant's ``bytes`` is always the sum of its
``sizes`` (every end adds a task's, every forget takes exactly the forgotten's).
"""
from __future__ import annotations

import uuid

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.redis_keys import done_key, sizes_key
from murmur_wsgi.hub.store.retention import Retention, task_bytes
from murmur_wsgi.hub.task import COMPLETED, REJECTED, HubTask
from murmur_wsgi.wire.task import now_ms

from tests.hub.conftest import KEY_B, HubClient, close_hub, hub_config, wait_until
from tests.hub.retention_util import ended as _ended
from tests.hub.retention_util import keys_of as _keys_of
from tests.hub.retention_util import kept as _kept
from tests.hub.retention_util import sizes as _sizes
from tests.hub.retention_util import total as _total

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

CAP = 64 * 1024


@pytest.fixture
def retention():
    """A cap of 100 tasks (batches of 10) and 64 KiB per tenant (globex: 1 MiB), for 60 s."""
    return Retention(60.0, 100, {"globex": {"max_bytes_per_tenant": 1024 ** 2}}, batch=10,
                     max_bytes=CAP)


def test_a_tasks_bytes_are_its_wire_form_and_its_events(stores):
    done = _ended(stores, events=['{"n":1}', '{"é":2}'])
    refused = _ended(stores, size=3_000, state=REJECTED)
    sizes = _sizes(stores, "acme")
    events, _ = stores.tasks.events(done.id, 0, 0, tenant="acme")
    assert sizes[done.id] == task_bytes(stores.tasks.task_json("acme", "echo", done.id),
                                        [event.payload for event in events])
    assert sizes[refused.id] == task_bytes(stores.tasks.task_json("acme", "echo", refused.id),
                                           ())                  # its event: read from the wire
    assert sizes[done.id] > 2 * 10_000 and _total(stores, "acme") == sum(sizes.values())


def test_past_its_bytes_a_tenant_forgets_its_oldest_finished_first(stores):
    other = _ended(stores, "globex", size=50_000)
    live = HubTask(str(uuid.uuid4()), "ctx", "acme", "echo", "live", {"messageId": "live"})
    stores.tasks.create(live, live.task_event())
    made = [_ended(stores) for _ in range(12)]
    sizes = _sizes(stores, "acme")
    assert sum(sizes.values()) <= CAP < sum(sizes.values()) + sizes[made[-1].id] * 2
    kept = [_kept(stores, task) for task in made]
    first = kept.index(True)
    assert first >= 1 and kept == [False] * first + [True] * (len(made) - first)
    assert set(sizes) == {task.id for task in made[first:]}
    assert all(not _keys_of(stores, task.id) for task in made[:first])
    assert _kept(stores, live) and _kept(stores, other)       # running; another tenant's
    assert _sizes(stores, "globex")[other.id] > CAP            # past acme's cap: its own
    assert stores.tasks.list("acme", "echo").total == len(made) - first + 1


def test_past_its_bytes_every_store_forgets_down_to_a_tenth_below_them(stores):
    """An end that takes a tenant past its bytes forgets its oldest finished down to a tenth
    below them, on every store: the same tasks go (before, the memory store forgot only down
    to the bytes, and kept one more than Redis: their GetTask answers differed)."""
    made = []
    for _ in range(12):
        before = _total(stores, "acme")
        made.append(_ended(stores, size=4_000))
        added = _sizes(stores, "acme")[made[-1].id]
        if before + added > CAP:
            assert _total(stores, "acme") <= CAP - CAP // 10, (len(made), _sizes(stores, "acme"))
        else:
            assert _total(stores, "acme") == before + added
    kept = [_kept(stores, task) for task in made]
    assert kept == [False] * 6 + [True] * 6, kept     # 8,879 bytes each: 6 fit 90 %


def test_the_newest_is_never_forgotten_at_its_own_end(stores):
    older = _ended(stores, size=5_000)
    newest = _ended(stores, size=29_500)      # between a tenth below the cap and the cap
    assert CAP * 0.9 < _sizes(stores, "acme")[newest.id] <= CAP
    assert not _kept(stores, older) and _kept(stores, newest)
    # Past the cap alone: kept at its end (its push notifications are still to be sent),
    # forgotten at the next.
    heavy = _ended(stores, size=40_000)
    assert not _kept(stores, newest) and _kept(stores, heavy)
    assert set(_sizes(stores, "acme")) == {heavy.id}
    after = _ended(stores, size=5_000)
    assert not _kept(stores, heavy) and _kept(stores, after)
    assert set(_sizes(stores, "acme")) == {after.id} and \
        _total(stores, "acme") == _sizes(stores, "acme")[after.id]


def test_the_sum_never_drifts_through_ends_forgets_and_sweeps(stores):
    tasks = stores.tasks
    made = [_ended(stores, size=size, state=REJECTED if size % 2 else COMPLETED,
                   events=['{"a":"' + "y" * size + '"}'] if size > 5_000 else ())
            for size in (9_001, 12_000, 2_000, 30_001, 500, 7_000, 16_000, 3_333)]
    assert _total(stores, "acme") == sum(_sizes(stores, "acme").values()) <= CAP
    kept = {task.id for task in made if _kept(stores, task)}
    assert set(_sizes(stores, "acme")) == kept and len(kept) < len(made)   # some went: bytes
    if stores.shared:     # the same ones forgotten twice: their bytes taken once
        oldest = tasks._redis.zrange(done_key("acme"), 0, 1)
        assert tasks._forget("acme", oldest) == len(oldest) >= 1
        assert tasks._forget("acme", oldest) == 0
    else:
        with tasks.lock:
            tasks._retain_locked("acme", tasks.clock() + 3600)      # all past their time
    assert _total(stores, "acme") == sum(_sizes(stores, "acme").values())
    more = [_ended(stores, size=size) for size in (20_000, 1_000)]
    ended = now_ms()
    tasks._keep = Retention(0.001, 100, batch=10, max_bytes=CAP)
    if stores.shared:                                  # Redis's own time, in ms
        wait_until(lambda: now_ms() > ended + 1, timeout=2.0)
    else:
        stores.tasks.clock.now += 1.0
    tasks.expire_finished()                            # the sweep: every one past its time
    assert _sizes(stores, "acme") == {} and _total(stores, "acme") == 0
    assert all(not _keys_of(stores, task.id) for task in made + more)
    if stores.shared:
        assert tasks._redis.exists(sizes_key("acme"), done_key("acme")) == 0


def test_a_hub_keeps_a_tenants_finished_bytes_under_its_cap(store):
    config = hub_config(store=store, redis={"sweep_interval_secs": 3600})
    config["tenants"]["acme"]["tasks"] = {"max_bytes_per_tenant": "256Ki"}
    hub = create_hub(config)
    try:
        rpc, other = HubClient(hub), HubClient(hub, headers={"X-API-Key": KEY_B})
        theirs = other.send("z" * 30_000)
        sent = [rpc.send("x" * 10_000) for _ in range(12)]
        wait_until(lambda: _code(rpc, sent[0]) == -32001, timeout=2.0)
        codes = [_code(rpc, task) for task in sent]
        first = codes.index(None)
        assert 1 <= first <= len(sent) - 2             # the oldest went, several are kept
        assert codes == [-32001] * first + [None] * (len(sent) - first)
        wires = [len(rpc.call("GetTask", {"id": task["id"]}).get_data()) for task in
                 sent[first:]]
        assert sum(wires) <= 256 * 1024               # the wire forms alone: under the cap
        assert rpc.result("ListTasks", {})["totalSize"] == len(sent) - first
        assert _code(other, theirs) is None           # another tenant's: untouched
    finally:
        close_hub(hub)


def _code(rpc, task) -> int | None:
    """GetTask's error code for ``task``, None when it answers it."""
    body = rpc.call("GetTask", {"id": task["id"]}).get_json()
    return body["error"]["code"] if "error" in body else None


def test_a_task_with_more_events_than_its_log_keeps_counts_what_the_log_holds(stores):
    if stores.shared:
        stores.tasks._max_events = 20             # redis.max_events_per_task, lowered
    done = _ended(stores, size=100, events=['{"chunk":"%s"}' % ("y" * 1_000)] * 200)
    events, _ = stores.tasks.events(done.id, 0, 0, tenant="acme")
    assert (len(events) < 200) if stores.shared else (len(events) > 200)   # memory: no trim
    assert _sizes(stores, "acme")[done.id] == task_bytes(
        stores.tasks.task_json("acme", "echo", done.id), [event.payload for event in events])
    assert _kept(stores, done)


@pytest.mark.parametrize("retention", [Retention(60.0, 10, max_bytes=8 * CAP)])
def test_a_small_count_cap_still_brings_its_ends_under_lowered_bytes(stores, retention):
    """A cap of 10 makes the count's batch 1; past the bytes (here lowered under what the
    tenant keeps), an end forgets more than one, so ends alone bring it back under."""
    assert retention.batch_of(10) == 1
    for _ in range(9):
        _ended(stores, size=9_000)
    assert _total(stores, "acme") > CAP
    stores.tasks._keep = Retention(60.0, 10, max_bytes=CAP)          # the cap lowered
    for _ in range(3):
        _ended(stores, size=9_000)
    assert _total(stores, "acme") <= CAP
