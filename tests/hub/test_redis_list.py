"""ListTasks on Redis with filters: a page reads a page of records whatever the filter, and
answers as the memory store does for the same tasks.

The same tasks go to a hub on each store: 120 finished long ago in two
contexts (3 of them FAILED), 2 held WORKING; then, after a cut, 2 more and one
of the held ones released. Every page of every filtered listing is compared, and Redis's own
command counts (INFO commandstats, reset before each page) show the records
a page read: the page's, not the 120 others'.
"""
from __future__ import annotations

import pytest
from redis import RedisCluster

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store import redis_index
from murmur_wsgi.hub.store.redis_keys import tenant_prefix
from murmur_wsgi.wire.task import now_ms, rfc3339

from tests.hub.agents import GATES, gate
from tests.hub.conftest import HubClient, hub_config, wait_until

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

OLD = 120


def _fill(rpc, store: str) -> str:
    """The tasks (message ids the same on both stores); returns the cut, RFC 3339."""
    for i in range(OLD):
        rpc.send("fail" if i % 40 == 7 else f"ok {i}", message_id=f"old-{i}",
                 context_id=f"c{i % 2}")
    held = [rpc.send(f"hold g-list-{store}-{n}", message_id=f"held-{n}",
                     configuration={"returnImmediately": True}) for n in (1, 2)]
    wait_until(lambda: rpc.result("ListTasks", {"status": "TASK_STATE_WORKING"})["totalSize"]
               == 2)
    cut = now_ms()
    wait_until(lambda: now_ms() > cut)
    for n in (1, 2):
        rpc.send(f"new {n}", message_id=f"new-{n}", context_id="c0")
    gate(f"g-list-{store}-1").set()
    wait_until(lambda: rpc.result("GetTask", {"id": held[0]["id"]})["status"]["state"]
               == "TASK_STATE_COMPLETED")
    return rfc3339(cut)


def _pages(rpc, params: dict, before_each=None) -> list:
    """Every page of a listing: (messageId, state) of its tasks, totalSize, more to come."""
    pages, token = [], ""
    while True:
        if before_each is not None:
            before_each()
        page = rpc.result("ListTasks", {**params, "pageToken": token} if token else params)
        pages.append(([(t["history"][0]["messageId"], t["status"]["state"])
                       for t in page["tasks"]], page["totalSize"], bool(page["nextPageToken"])))
        token = page["nextPageToken"]
        if not token:
            return pages


def _listings(cut: str) -> list:
    return [{"status": "TASK_STATE_FAILED", "pageSize": 2},
            {"status": "TASK_STATE_WORKING"},
            {"status": "TASK_STATE_COMPLETED", "pageSize": 40},
            {"statusTimestampAfter": cut, "pageSize": 2},
            {"statusTimestampAfter": cut, "status": "TASK_STATE_COMPLETED", "pageSize": 1},
            {"statusTimestampAfter": "2000-01-01T00:00:00Z", "pageSize": 50},
            {"contextId": "c1", "status": "TASK_STATE_FAILED", "pageSize": 2},
            {"contextId": "c0", "statusTimestampAfter": cut},
            {"contextId": "c0", "statusTimestampAfter": cut, "status": "TASK_STATE_COMPLETED"}]


@pytest.fixture
def hubs(redis_server):
    redis_server.flush()
    limits = {"run_timeout_secs": 30, "rate_per_minute": 1000}
    made = {store: create_hub(hub_config(store=url, limits=limits))
            for store, url in (("memory", "memory"), ("redis", redis_server.url))}
    yield {store: HubClient(h, "mixed") for store, h in made.items()}
    for h in made.values():
        h.close(drain_timeout=0)
    for name in [name for name in GATES if name.startswith("g-list-")]:
        del GATES[name]             # the next Redis (the cluster) waits on gates of its own


def test_filtered_pages_read_a_page_and_answer_as_the_memory_store(hubs, redis_server):
    cuts = {store: _fill(rpc, store) for store, rpc in hubs.items()}
    client = redis_server.client()
    # On a cluster, the counts of the primary that holds the tenant's slot.
    counted = client.get_node_from_key(tenant_prefix("acme")).redis_connection \
        if isinstance(client, RedisCluster) else client
    reads = []

    def reset():
        stats = counted.info("commandstats")
        reads.append(stats.get("cmdstat_hgetall", {}).get("calls", 0))

    try:
        for params in _listings(cuts["memory"]):
            memory = _pages(hubs["memory"], params)
            redis_params = {**params, **({"statusTimestampAfter": cuts["redis"]}
                                         if params.get("statusTimestampAfter") == cuts["memory"]
                                         else {})}
            reads.clear()
            redis = _pages(hubs["redis"], redis_params, before_each=reset)
            reset()
            assert redis == memory, params
            # Records read by each page: its own tasks, once.
            per_page = [after - before for before, after in zip(reads, reads[1:])]
            assert per_page == [len(tasks) for tasks, _, _ in redis], (params, per_page)
    finally:
        client.close()
        gate("g-list-memory-2").set()
        gate("g-list-redis-2").set()


def test_a_small_context_among_many_tasks_changed_since_reads_its_own(hubs, redis_server,
                                                                       monkeypatch):
    """``contextId`` (or a status of 3) with ``statusTimestampAfter`` when every task changed
    since: the page is the context's own, none of the 120 others asked their place in it
    (ZMSCORE by batches of 10 here: no call, not 13), with the memory store's answer
    (tests/hub/test_redis_list_sides.py counts each side's asks)."""
    monkeypatch.setattr(redis_index, "SCORE_BATCH", 10)
    for store, rpc in hubs.items():
        _fill(rpc, store)
        rpc.send("alone", message_id="tiny-1", context_id="tiny")
    client = redis_server.client()
    counted = client.get_node_from_key(tenant_prefix("acme")).redis_connection \
        if isinstance(client, RedisCluster) else client
    calls = lambda: counted.info("commandstats").get(  # noqa: E731
        "cmdstat_zmscore", {}).get("calls", 0)
    since = {"statusTimestampAfter": "2000-01-01T00:00:00Z"}
    try:
        for params, total in (({"contextId": "tiny", **since}, 1),
                              ({"status": "TASK_STATE_FAILED", **since}, 3)):
            memory = _pages(hubs["memory"], params)
            before = calls()
            assert _pages(hubs["redis"], params) == memory, params
            assert calls() - before == 0, params
            assert [page[1] for page in memory] == [total], params
    finally:
        client.close()
        gate("g-list-memory-2").set()
        gate("g-list-redis-2").set()
