"""One unreadable record on Redis (written there by hand, an old release, a bad restore)
costs at most its own task: the sweep of a dead replica's runs, the pages that list it,
its tenant's admission and the other tenants' retention go on."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.redis_keys import (REPLICAS, bytes_key, done_key, events_key,
                                              member, rate_key, runs_key, sizes_key,
                                              task_key)

from tests.hub.conftest import (FAST, KEY_B, HubClient, close_hub, hub_config, sse_events,
                               wait_until)

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too


@pytest.fixture
def rpc(redis_server):
    redis_server.flush()
    h = create_hub(hub_config(store=redis_server.url))
    yield HubClient(h)
    close_hub(h)


def _state(rpc, task_id):
    return rpc.result("GetTask", {"id": task_id})["status"]["state"]


def _swept_despite(pair, text: str, spoil) -> None:
    """A run of replica A, then ``spoil(redis, a)``; A vanishes: B's sweep still ends the
    run FAILED."""
    a, b = pair
    a.agent = b.agent = "stubborn"
    task = a.send(text, configuration={"returnImmediately": True})
    wait_until(lambda: _state(b, task["id"]) == "TASK_STATE_WORKING")
    r = a.hub.store._redis
    spoil(r, a)
    a.hub.replica.stop()                # A vanishes: B's sweep ends its runs FAILED
    r.delete(f"murmur:{{hub}}:replica:{a.hub.store.replica}")
    wait_until(lambda: _state(b, task["id"]) == "TASK_STATE_FAILED")


def test_an_event_without_its_payload_does_not_stop_the_sweep(pair):
    def spoil(r, a):
        # A run of A listed first, whose log holds an entry without its payload ``p``.
        r.zadd(runs_key(a.hub.store.replica), {member("acme", "bad-log"): 0})
        r.xadd(events_key("acme", "bad-log"), {"x": "1"}, id="1-1")
    _swept_despite(pair, "g-bad-log", spoil)


def test_a_replica_s_runs_of_the_wrong_type_do_not_stop_the_sweep(pair):
    def spoil(r, a):
        # A replica listed first (before every uuid hex) whose runs are not a sorted set.
        r.sadd(REPLICAS, "0-bad")
        r.set(runs_key("0-bad"), "garbage")
    _swept_despite(pair, "g-bad-runs", spoil)


@pytest.mark.parametrize("field, value", [("wire", "garbage{"), ("wire", "[1]"),
                                          ("ms", "x"), ("ctx", None)])
def test_an_unreadable_record_is_left_out_of_its_list_page(rpc, field, value):
    good = rpc.send("one")["id"]
    bad = rpc.send("two")["id"]
    key = task_key("acme", bad)
    if value is None:
        rpc.hub.store._redis.hdel(key, field)
    else:
        rpc.hub.store._redis.hset(key, field, value)
    listed = rpc.result("ListTasks", {})
    assert [task["id"] for task in listed["tasks"]] == [good]
    assert rpc.result("ListTasks", {"contextId": rpc.result(
        "GetTask", {"id": good})["contextId"]})["tasks"][0]["id"] == good


@pytest.mark.parametrize("filters", [{}, {"statusTimestampAfter": "2000-01-01T00:00:00Z",
                                          "status": "TASK_STATE_COMPLETED"}])
def test_an_unreadable_record_last_on_its_page_does_not_end_the_listing(rpc, filters):
    # The newest task's record cannot be read: a page of one holds none, and its token
    # still leads past it to the older task (it ended the listing, the older unreachable).
    good = rpc.send("one")["id"]
    bad = rpc.send("two")["id"]
    rpc.hub.store._redis.hset(task_key("acme", bad), "wire", "garbage{")
    listed, token = [], ""
    for _ in range(3):
        page = rpc.result("ListTasks", {"pageSize": 1, "pageToken": token, **filters})
        listed += [task["id"] for task in page["tasks"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert listed == [good]
    assert token == ""


def test_a_rate_bucket_without_its_time_does_not_stop_the_tenant_s_admission(rpc):
    rpc.hub.store._redis.hset(rate_key("acme"), mapping={"tokens": "5", "at": "garbage"})
    assert rpc.send("hello")["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_tenant_s_retention_of_the_wrong_type_does_not_stop_the_others(redis_server):
    redis_server.flush()
    h = create_hub(hub_config(store=redis_server.url, redis=dict(FAST),
                              tasks={"retention_secs": 0.2}))
    try:
        # acme, swept first, has its finished tasks' set not a sorted set.
        h.store._redis.set(done_key("acme"), "garbage")
        globex = HubClient(h, headers={"X-API-Key": KEY_B})
        task_id = globex.send("hi")["id"]
        # The sweep's retention forgets globex's task once past its 0.2 s.
        wait_until(lambda: globex.call("GetTask", {"id": task_id}).get_json().get(
            "error", {}).get("code") == -32001)
    finally:
        close_hub(h)


def test_an_event_without_its_payload_fails_its_own_stream_with_32603(rpc):
    bad, good = rpc.send("one")["id"], rpc.send("two")["id"]
    rpc.hub.store._redis.xadd(events_key("acme", bad), {"x": "1"}, id="100-1")
    events = sse_events(rpc.call("SubscribeToTask", {"id": bad}))
    assert events[-1]["error"]["code"] == -32603, events[-1]
    events = sse_events(rpc.call("SubscribeToTask", {"id": good}))
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_bytes_sum_not_a_number_does_not_fail_every_end_of_its_tenant(rpc):
    r = rpc.hub.store._redis
    r.set(bytes_key("acme"), "garbage")
    for text in ("one", "two"):
        assert rpc.send(text)["status"]["state"] == "TASK_STATE_COMPLETED"
    # Each end was written whole: the sum counted anew from the tasks' sizes, then kept.
    assert int(r.get(bytes_key("acme"))) == sum(map(int, r.hvals(sizes_key("acme"))))
