"""The hub on a real Redis Cluster that loses a primary: with ``cluster-require-full-coverage
no`` the other primaries serve on, and a replica's turn (its sweep, its slots' renewal, its
runs' marks, its unwritten ends) still reaches their tenants; with a replica of each primary,
the one that takes over serves the lost primary's tenants at once.
"""
from __future__ import annotations

import os
import signal
import threading

import pytest
from redis.crc import key_slot

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.redis_keys import HUB, mark_key, tenant_prefix
from tests.hub.agents import gate
from tests.hub.conftest import FAST, HubClient, agent, hub_config, sha, wait_until
from tests.hub.test_redis_cluster import _primary_of


# --- a primary lost, the others serving (cluster-require-full-coverage no) ------------------

KEY_LOST = "mhk_tenant-on-the-lost-primary"


def _partial_cluster(cluster):
    """``cluster`` serving the slots it still has once a primary is lost, as
    ``cluster-require-full-coverage no`` makes it; the tenant "umbrella" (on a primary other
    than acme's and the hub's slot's) added to the hubs' configuration."""
    for node in cluster.nodes:
        client = node.client()
        try:
            client.config_set("cluster-require-full-coverage", "no")
        finally:
            client.close()
    client = cluster.client()
    try:
        owners = {name: client.get_node_from_key(prefix).port for name, prefix in (
            ("hub", HUB), ("acme", tenant_prefix("acme")), ("umbrella", tenant_prefix("umbrella")))}
    finally:
        client.close()
    assert len(set(owners.values())) == 3, owners
    config = hub_config(store=cluster.url, redis=dict(FAST))
    config["tenants"]["umbrella"] = {"api_keys": [sha(KEY_LOST)],
                                     "agents": {"held": agent("tests.hub.agents:held")}}
    return config, next(n for n in cluster.nodes if n.port == owners["umbrella"])


def _set(node, name: str, value: str) -> None:
    client = node.client()
    try:
        client.config_set(name, value)
    finally:
        client.close()


def _kill(node) -> None:
    os.kill(node.proc.pid, signal.SIGKILL)
    node.proc.wait(timeout=5)


def _vanish(hub) -> None:
    """``hub`` stops its liveness renewals, its key gone (what SIGKILL leaves after the TTL)."""
    hub.replica.stop()
    hub.store._redis.delete(f"{HUB}replica:{hub.store.replica}")


def _rest(chunks, timeout: float) -> str | None:
    """The rest of a stream, read on a thread; None when it has not ended within ``timeout``."""
    read = []
    reader = threading.Thread(target=lambda: read.append(b"".join(chunks).decode()),
                              daemon=True)
    reader.start()
    reader.join(timeout)
    return read[0] if read else None


def _swept(cluster, together: bool, stalled: bool = False) -> str | None:
    """Hub A runs a task of the tenant whose primary is then lost (killed, or ``stalled``:
    SIGSTOP, each command to it timing out), and acme's is run by A (``together``) or B;
    the replica running acme's vanishes: the rest of its stream on the other, None when it
    has not ended within 3 s (its sweep every 0.1 s)."""
    config, lost = _partial_cluster(cluster)
    a, b = create_hub(config), create_hub(config)
    runner, watcher = (a, b) if together else (b, a)
    try:
        HubClient(a, "held", headers={"X-API-Key": KEY_LOST}).send(
            f"g-lost-{together}", configuration={"returnImmediately": True})
        left = HubClient(runner, "held").send(f"g-left-{together}",
                                              configuration={"returnImmediately": True})
        stream = HubClient(watcher, "held").call("SubscribeToTask", {"id": left["id"]},
                                                 buffered=False)
        chunks = iter(stream.response)
        assert left["id"] in next(chunks).decode()
        if stalled:
            # NOTE: the cluster takes it for failed only past its node timeout (then each
            # command to it fails at once): none within the test.
            for node in cluster.nodes:
                _set(node, "cluster-node-timeout", "60000")
            os.kill(lost.proc.pid, signal.SIGSTOP)
            # The watcher's turns wait on its run there: one has failed.
            wait_until(lambda: watcher.replica._failing, timeout=3)
        else:
            _kill(lost)
        _vanish(runner)
        return _rest(chunks, 3.0)
    finally:
        if stalled:
            os.kill(lost.proc.pid, signal.SIGCONT)
        for h in (a, b):
            h.close(drain_timeout=0.5)
        cluster.stop()


@pytest.mark.timed
@pytest.mark.waits
def test_the_sweep_ends_other_tenants_runs_while_one_tenants_primary_is_lost(spare_cluster):
    """A replica vanishes with runs of two tenants, and the primary of one of them is lost
    too (one host held both): the other replica's sweep still ends the other tenant's run
    FAILED, and its stream there gets that end, within a second."""
    rest = _swept(spare_cluster, together=True)
    assert rest is not None, "the stream of the other tenant's task did not end"
    assert "TASK_STATE_FAILED" in rest and "interrupted" in rest


def _beside_a_lost_run(hub, name: str):
    """A run of the lost primary's tenant on ``hub``, then one of acme's: acme's client and
    its task."""
    HubClient(hub, "held", headers={"X-API-Key": KEY_LOST}).send(
        f"g-{name}-lost", configuration={"returnImmediately": True})
    rpc = HubClient(hub, "held")
    return rpc, rpc.send(f"g-{name}-kept", configuration={"returnImmediately": True})


@pytest.mark.timed
@pytest.mark.waits
def test_a_replica_renews_other_tenants_slots_while_one_tenants_primary_is_lost(spare_cluster):
    """A replica runs a task of a tenant whose primary is lost and one of acme (one run at
    once): it still renews acme's slot, so acme's second message stays refused."""
    config, lost = _partial_cluster(spare_cluster)
    config["tenants"]["acme"]["limits"] = {"concurrency": 1}
    hub = create_hub(config)
    try:
        rpc, kept = _beside_a_lost_run(hub, "lease")
        client = spare_cluster.client()
        try:
            leased = client.zscore(f"{tenant_prefix('acme')}running", kept["id"])
            _kill(lost)
            # Past the lease the slot had when the primary was lost, on Redis's clock.
            wait_until(lambda: _redis_ms(client) > leased, timeout=5)
        finally:
            client.close()
        second = rpc.send("g-lease-second", configuration={"returnImmediately": True})
        assert second["status"]["state"] == "TASK_STATE_REJECTED", second
    finally:
        hub.close(drain_timeout=0.5)
        spare_cluster.stop()


def _redis_ms(client) -> int:
    seconds, micros = client.time(target_nodes=client.get_node_from_key(HUB))
    return seconds * 1000 + micros // 1000


@pytest.mark.timed
@pytest.mark.waits
def test_a_replica_running_a_task_on_the_lost_primary_still_sweeps(spare_cluster):
    """The replica that runs a task of the tenant whose primary is lost fails every turn's
    look at that run: its turn still sweeps, and ends the run of acme a vanished replica
    left, its stream there ending with it."""
    rest = _swept(spare_cluster, together=False)
    assert rest is not None, "the sweep did not end the vanished replica's run"
    assert "TASK_STATE_FAILED" in rest and "interrupted" in rest


@pytest.mark.timed
@pytest.mark.waits
def test_a_replica_whose_turns_wait_on_a_stalled_primary_still_sweeps(spare_cluster):
    """As above, the lost primary stalled (SIGSTOP): each of the replica's turns waits
    ``redis.timeout_secs`` on its run there, so its beats come further apart than two thirds
    of ``redis.liveness_secs`` though the hub's slot answers every one. That is no outage
    of the replicas' keys: the sweep is not held, and ends the vanished replica's run."""
    rest = _swept(spare_cluster, together=False, stalled=True)
    assert rest is not None, "the sweep did not end the vanished replica's run"
    assert "TASK_STATE_FAILED" in rest and "interrupted" in rest


@pytest.mark.timed
@pytest.mark.waits
def test_a_replica_running_a_task_on_the_lost_primary_still_checks_its_other_runs_marks(
        spare_cluster):
    """A replica runs a task of the tenant whose primary is lost and one of acme; acme's is
    marked canceled with no word on the channel (a message the listener missed): the turn's
    look at its runs' marks still finds it, and the task ends CANCELED."""
    config, lost = _partial_cluster(spare_cluster)
    hub = create_hub(config)
    try:
        rpc, task = _beside_a_lost_run(hub, "marks")
        _kill(lost)
        client = spare_cluster.client()
        try:
            client.set(mark_key("acme", task["id"]), "1", px=60_000)
        finally:
            client.close()
        state = lambda: rpc.call("GetTask", {"id": task["id"]}).get_json()[  # noqa: E731
            "result"]["status"]["state"]
        wait_until(lambda: state() == "TASK_STATE_CANCELED", timeout=3)
    finally:
        hub.close(drain_timeout=0.5)
        spare_cluster.stop()


@pytest.mark.timed
@pytest.mark.waits
def test_a_tenant_is_served_at_once_when_its_lost_primary_s_replica_takes_over(
        replicated_cluster):
    """A cluster with a replica of each primary: the primary of acme's slot is SIGKILLed and
    its replica takes over. A node that is gone answers no MOVED: a request that fails to
    reach it refreshes the slot map (at most once a second) and is answered by the new
    primary."""
    cluster = replicated_cluster
    hub = create_hub(hub_config(store=cluster.url, redis={"timeout_secs": 1.0,
                                                          "sweep_interval_secs": 60}))
    rpc = HubClient(hub, "echo")
    try:
        task = rpc.send("before")
        primary = _primary_of(cluster, tenant_prefix("acme"))
        replica = cluster.replica_of(primary)
        # Replication is asynchronous: the replica is waited for until it holds the task.
        written = primary.client().info("replication")["master_repl_offset"]
        wait_until(lambda: replica.client().info("replication")["slave_repl_offset"] >= written)
        _kill(primary)
        assert "error" in rpc.call("GetTask", {"id": task["id"]}).get_json()
        replica.client().execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
        slot = key_slot(tenant_prefix("acme").encode())
        live = [n for n in cluster.nodes if n is not primary]
        wait_until(lambda: all(_owner_of(n, slot) == replica.port for n in live), timeout=10)
        # NOTE: the request failed just now refreshed the map: the next refresh is a second on.
        wait_until(lambda: "result" in rpc.call("GetTask", {"id": task["id"]}).get_json(),
                   timeout=1.0 + 1.0)
        assert rpc.send("after")["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        hub.close(drain_timeout=0.5)
        cluster.stop()


def _owner_of(node, slot: int) -> int | None:
    """The port of the primary ``node`` names for ``slot``."""
    client = node.client()
    try:
        for first, last, owner, *_ in client.execute_command("CLUSTER", "SLOTS"):
            if first <= slot <= last:
                return int(owner[1])
        return None
    finally:
        client.close()


@pytest.mark.timed
@pytest.mark.waits
def test_a_replica_writes_other_tenants_unwritten_ends_while_one_tenants_primary_is_lost(
        spare_cluster):
    """A replica holds two unwritten ends: first one of the tenant whose primary is lost,
    then acme's, refused while acme's primary would take no write. Once acme's primary
    takes writes again, the replica's turn writes acme's end, though the one before it
    still fails."""
    config, lost = _partial_cluster(spare_cluster)
    hub = create_hub(config)
    acme = _primary_of(spare_cluster, tenant_prefix("acme")).client()
    try:
        rpc, task = _beside_a_lost_run(hub, "ends")
        _kill(lost)
        gate("g-ends-lost").set()
        wait_until(lambda: len(hub.runs.unwritten) == 1, timeout=3)
        acme.config_set("maxmemory", 1)         # every write refused: OOM
        try:
            gate("g-ends-kept").set()
            wait_until(lambda: len(hub.runs.unwritten) == 2, timeout=3)
        finally:
            acme.config_set("maxmemory", 0)
        state = lambda: rpc.call("GetTask", {"id": task["id"]}).get_json()[  # noqa: E731
            "result"]["status"]["state"]
        # NOTE: GetTask may answer the run's end before the turn wrote it: both waited for.
        wait_until(lambda: state() == "TASK_STATE_COMPLETED" and len(hub.runs.unwritten) == 1,
                   timeout=3)
        # The one left is the lost primary's tenant's, still to write.
        assert [args[0] for args in hub.runs.unwritten] != [task["id"]]
    finally:
        acme.close()
        hub.close(drain_timeout=0.5)
        spare_cluster.stop()


@pytest.mark.timed
@pytest.mark.waits
def test_the_listener_follows_its_nodes_replica_at_once_when_the_hub_sends_it_nothing(
        replicated_cluster):
    """A cluster with a replica of each primary: the primary the listener is subscribed to
    (the one of the hub's channels' slot) is SIGKILLed and its replica takes over, while
    the hub sends that slot nothing (its beats a minute apart). The listener's own failed
    connections refresh the slot map: it subscribes on the new primary within its
    reconnection pace plus one refresh, not at the hub's next command there."""
    cluster = replicated_cluster
    hub = create_hub(hub_config(store=cluster.url, redis={
        "timeout_secs": 1.0, "liveness_secs": 180, "sweep_interval_secs": 60}))
    try:
        feed = hub.store.conn.feed
        wait_until(lambda: feed.subscribed, timeout=5)
        primary = _primary_of(cluster, HUB)
        replica = cluster.replica_of(primary)
        _kill(primary)
        wait_until(lambda: not feed.subscribed, timeout=5)
        replica.client().execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
        slot = key_slot(HUB.encode())
        live = [n for n in cluster.nodes if n is not primary]
        wait_until(lambda: all(_owner_of(n, slot) == replica.port for n in live), timeout=10)
        # NOTE: the listener tries again each RECONNECT_SECS (1 s), each failure refreshing
        # the map at most once a second.
        wait_until(lambda: feed.subscribed, timeout=1.0 + 1.0 + 0.5)
    finally:
        hub.close(drain_timeout=0.5)
        cluster.stop()
