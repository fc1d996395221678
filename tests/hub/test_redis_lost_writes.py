"""The hub on Sentinel after a failover that lost writes (``redis.wait_replicas`` 0): what the
old primary acknowledged and its replica never had is gone, and the hub's later writes go
to the new primary.

The loss is made for real: the replica is stopped (SIGSTOP) and large writes fill its link
until the primary holds some in its own buffer, so what it writes next waits there; the primary is killed, the
replica resumed and promoted by the sentinels (tests/redis_topologies.py).
"""
from __future__ import annotations

import os
import signal

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store import redis_stores
from murmur_wsgi.hub.store.redis_runs import LOST_END
from murmur_wsgi.hub.store.redis_keys import member, runs_key, task_key
from murmur_wsgi.hub.task import CANCELED, COMPLETED, WORKING, HubTask
from tests.hub.agents import gate
from tests.hub.conftest import HubClient, close_hub, hub_config, replica_turn, wait_until
from tests.hub.test_redis_cluster_lost import KEY_LOST, _kill, _partial_cluster
from tests.redis_sentinels import SentinelSet

FILLER_BYTES = 8 * 1024 * 1024          # written until the link's buffers are full


@pytest.fixture
def own_sentinels(tmp_path):
    started = SentinelSet(tmp_path / "sentinel", down_after_ms=500, quick=True).start()
    yield started
    started.stop_soon()


def _unreplicated(sentinels):
    """The replica stopped, its link full: the primary holds bytes for it in its own buffer
    (the kernel's took what they could), and every write after them reaches it never."""
    os.kill(sentinels.replica.proc.pid, signal.SIGSTOP)
    client = sentinels.primary.client()
    written = []

    def held() -> bool:
        written.append(f"filler:{len(written)}")
        client.set(written[-1], "x" * FILLER_BYTES)
        return any(int(c["omem"]) > 0 for c in client.client_list(_type="replica"))
    try:
        wait_until(held)
    finally:
        client.close()


def _failed_over(sentinels) -> None:
    """The primary killed, the stopped replica resumed and promoted, the old one back as
    its replica."""
    sentinels.kill_primary()
    os.kill(sentinels.replica.proc.pid, signal.SIGCONT)
    sentinels.wait_failover()
    sentinels.rejoin()


@pytest.mark.timed
@pytest.mark.waits
@pytest.mark.parametrize("looked_before", [False, True],
                         ids=["first-turn-after", "a-turn-before-the-failover"])
def test_a_run_whose_end_was_lost_in_a_failover_ends_failed_not_working_forever(
        own_sentinels, looked_before):
    """Before 4667ee2: a run's end written to the primary (its client told COMPLETED) and lost
    with it left the task WORKING on the new primary, while the replica's next beat took the
    run out of its runs there: no sweep would ever end it. Before the beat's ``LEAVE``
    (``looked_before``): a turn read the task COMPLETED on the old primary (not yet on its
    replica), the primary failed over, and the next beat took the run out on the new one,
    the task WORKING there, the same. Now the beat takes a run out only in the script that
    finds its task ended on the primary it writes to; the turn ends it FAILED (LOST_END)."""
    sentinels = own_sentinels
    hub = create_hub(hub_config(store=sentinels.url, redis={"timeout_secs": 1.0}))
    rpc = HubClient(hub, "held")
    try:
        task = rpc.send("g-lost-end", configuration={"returnImmediately": True})
        key = task_key("acme", task["id"])
        old = sentinels.primary.client()
        wait_until(lambda: old.hget(key, "state") == "TASK_STATE_WORKING")
        hub.replica.stop()               # no turn of its own: the test makes one, after
        _unreplicated(sentinels)
        gate("g-lost-end").set()
        wait_until(lambda: old.hget(key, "state") == "TASK_STATE_COMPLETED")
        if looked_before:
            hub.store.settle_runs()      # the turn before the failover: COMPLETED there
        old.close()
        _failed_over(sentinels)
        new = sentinels.primary.client()
        assert new.hget(key, "state") == "TASK_STATE_WORKING"       # the end was lost
        # NOTE: the old primary wrote the end; its answer may still have been on its way
        # when it was killed (seen at load): the end is then refused here, kept, and the
        # turn writes it again, on the new primary. Either way the task ends.
        wait_until(lambda: not hub.runs.in_flight())
        refused = bool(hub.runs.unwritten)
        ended = "TASK_STATE_COMPLETED" if refused else "TASK_STATE_FAILED"
        wait_until(lambda: replica_turn(hub) and new.hget(key, "state") == ended)
        wait_until(lambda: replica_turn(hub) and new.zscore(
            runs_key(hub.store.replica), member("acme", task["id"])) is None)
        status = rpc.result("GetTask", {"id": task["id"]})
        if refused:
            assert status["artifacts"][0]["parts"][0]["text"] == "released"
        else:
            assert status["status"]["message"]["parts"][0]["text"] == LOST_END
        new.close()
    finally:
        close_hub(hub)


@pytest.mark.timed
def test_runs_whose_ends_the_replicas_acknowledged_leave_with_nothing_read(own_sentinels):
    """With ``wait_replicas`` 1 every end the hub answered is on a replica: no failover loses
    it. Before, the replica's turn read each ended run's task state all the same (one HGET a
    message, in a round trip a turn); now the beat takes them out in one ZREM."""
    sentinels = own_sentinels
    hub = create_hub(hub_config(store=sentinels.url,
                                redis={"wait_replicas": 1, "timeout_secs": 1.0}))
    primary = sentinels.primary.client()
    try:
        rpc = HubClient(hub)
        hub.replica.stop()
        ids = [rpc.send(f"m{n}")["id"] for n in range(3)]
        primary.config_resetstat()
        wait_until(lambda: replica_turn(hub) and not primary.zrange(
            runs_key(hub.store.replica), 0, -1))
        calls = primary.info("commandstats")
        assert "cmdstat_hget" not in calls and "cmdstat_evalsha" not in calls, calls
        assert {primary.hget(task_key("acme", i), "state") for i in ids} == {
            "TASK_STATE_COMPLETED"}
    finally:
        primary.close()
        close_hub(hub)


def test_a_lost_end_that_another_replica_ends_meanwhile_keeps_that_end(redis_server, caplog):
    """A run whose end the beat found lost (its task WORKING again, as on a new primary) and
    that another replica cancels before the turn ends it: the cancel stands, the run leaves
    the runs, and no end is said FAILED that was not (before, the turn logged one)."""
    redis_server.flush()
    replicas = [redis_stores(redis_server.url, replica_id=name) for name in ("me", "r2")]
    mine, other = replicas[0].tasks, replicas[1].tasks
    try:
        task = HubTask("t-1", "ctx", "acme", "echo", "m-1", {"messageId": "m-1"})
        mine.create(task, task.task_event())
        mine.start("t-1")
        mine.end("t-1", COMPLETED, None, None, [], tenant="acme")
        mine._redis.hset(task_key("acme", "t-1"), "state", WORKING)     # the end lost
        replicas[0].replicas.heartbeat()
        assert mine._unended == [member("acme", "t-1")]
        assert other.end("t-1", CANCELED, "canceled", None, [], tenant="acme") is not None
        mine.settle_runs()
        replicas[0].replicas.heartbeat()
        assert mine._redis.hget(task_key("acme", "t-1"), "state") == CANCELED
        assert mine._redis.zrange(runs_key(mine.replica), 0, -1) == []
        assert "ended FAILED" not in caplog.text
    finally:
        for stores in replicas:
            stores.close()


@pytest.mark.timed
@pytest.mark.waits
def test_a_run_left_on_a_lost_primary_keeps_no_beat_from_redis(spare_cluster):
    """A cluster serving on without one primary (``cluster-require-full-coverage no``): a run
    of that primary's tenant ended just before it was lost cannot be looked at; it stays in
    the runs, looked at again at later turns, and the replica's beats (the hub's slot) are
    taken as before, so the sweep is held by nothing."""
    cluster = spare_cluster
    config, lost = _partial_cluster(cluster)
    hub = create_hub(config)
    try:
        task = HubClient(hub, "held", headers={"X-API-Key": KEY_LOST}).send(
            "g-left-on-the-lost", configuration={"returnImmediately": True})
        hub.replica.stop()
        gate("g-left-on-the-lost").set()
        wait_until(lambda: hub.store._left)              # ended: left, not looked at yet
        _kill(lost)
        hub.store.settle_runs()                          # its tenant's primary is away
        hub.replica.store.heartbeat()                    # the beat is taken
        runs = hub.store._redis.zrange(runs_key(hub.store.replica), 0, -1)
        assert member("umbrella", task["id"]) in runs
        assert hub.store._left == [member("umbrella", task["id"])]
    finally:
        close_hub(hub)
        cluster.stop()
