"""The hub on a real Redis Cluster whose slots move while it serves (``redis-cli --cluster
reshard`` or ``rebalance``: a slot's keys are sent over in batches, then the slot is given
to its new owner), as hub/store/redis_redirects.py follows it.

The migration here is made step by step, as redis-cli makes it (``CLUSTER SETSLOT …
IMPORTING`` and ``MIGRATING``, ``MIGRATE … KEYS``, ``CLUSTER SETSLOT … NODE``), so each
test holds its slot where it wants: some keys moved, some not; the last one reshards with
redis-cli itself, under load. tests/hub/test_redis_cluster.py covers one command following
ASK, then MOVED.
"""
from __future__ import annotations

import subprocess
import threading

import pytest
from redis.crc import key_slot

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.redis_keys import (HUB, REPLICAS, runs_key, task_key,
                                              tenant_prefix)
from tests.hub.agents import gate
from tests.hub.conftest import (HubClient, agent, close_hub, hub_config, send_params, sha,
                                wait_until)
from tests.hub.test_redis_cluster import _node_id, _owned_again, _primary_of, _set_owner
from tests.hub.test_streams import Reader
from tests.redis_topologies import _binary, _Node, cluster_port

KEY_SCALE = "mhk_tenant-moved-to-the-new-primary"


class Migration:
    """The slot of ``tag`` moving from its primary to another one of ``cluster`` (or
    ``target``, a node of it), by hand."""

    def __init__(self, cluster, tag: str, target=None):
        self.cluster = cluster
        self.source = _primary_of(cluster, tag)
        self.target = target or next(n for n in cluster.nodes[:cluster.size]
                                     if n.port != self.source.port)
        self.src, self.dst = self.source.client(), self.target.client()
        self.slot = self.src.execute_command("CLUSTER", "KEYSLOT", tag)
        self.src_id, self.dst_id = _node_id(self.src), _node_id(self.dst)

    def start(self) -> Migration:
        self.dst.execute_command("CLUSTER", "SETSLOT", self.slot, "IMPORTING", self.src_id)
        self.src.execute_command("CLUSTER", "SETSLOT", self.slot, "MIGRATING", self.dst_id)
        return self

    def move(self, *keys: str) -> None:
        """``keys`` sent to the target (redis-cli's MIGRATE, without REPLACE)."""
        self.src.execute_command("MIGRATE", "127.0.0.1", self.target.port, "", 0, 5000,
                                 "KEYS", *keys)

    def left(self) -> list[str]:
        return self.src.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, 100_000)

    def moved(self) -> list[str]:
        """The slot's keys the target holds."""
        return self.dst.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, 100_000)

    def finish(self) -> None:
        """Every key left moved, and the slot the target's on every node."""
        left = self.left()
        if left:
            self.move(*left)
        _set_owner(self.cluster, self.slot, self.dst_id)

    def errors(self, name: str) -> int:
        """How many answers of ``name`` (TRYAGAIN, ASK) the source has given."""
        return self.src.info("errorstats").get(f"errorstat_{name}", {}).get("count", 0)

    def undo(self) -> None:
        """The cluster as it was: the slot (flushed) its first owner's again."""
        try:
            _owned_again(self.cluster, self.slot, self.src_id)
        finally:
            self.src.close()
            self.dst.close()


@pytest.fixture
def hub_on_cluster(redis_cluster):
    redis_cluster.flush()
    h = create_hub(hub_config(store=redis_cluster.url))
    yield h
    close_hub(h)


def test_a_message_waits_while_its_tenants_slot_holds_its_keys_in_part(redis_cluster,
                                                                       hub_on_cluster):
    """Before: a message whose tenant's slot migrates, its index still on the old owner and
    the new task's keys nowhere, got TRYAGAIN, answered -32603 at once (159 of 3,047
    messages of a reshard under load). Now it is sent again until the keys have moved."""
    rpc = HubClient(hub_on_cluster)
    first = rpc.send("before")
    migration = Migration(redis_cluster, tenant_prefix("acme")).start()
    try:
        migration.move(task_key("acme", first["id"]))
        before = migration.errors("TRYAGAIN")
        answers = []
        sender = threading.Thread(target=lambda: answers.append(
            rpc.call("SendMessage", send_params("during")).get_json()))
        sender.start()
        wait_until(lambda: migration.errors("TRYAGAIN") > before or answers)
        migration.finish()
        sender.join(10)
        assert "result" in answers[0], answers[0]
        task = answers[0]["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        listed = rpc.result("ListTasks", {})["tasks"]
        assert {t["id"] for t in listed} == {first["id"], task["id"]}
    finally:
        migration.undo()


def test_list_tasks_reads_records_that_moved_through_ask(redis_cluster, hub_on_cluster):
    """Before: ListTasks while some of the page's records had moved to the importing node
    answered -32603 (its pipeline sent the node's part once more to the old owner, which
    answered ASK again). Now each record is read where it is."""
    rpc = HubClient(hub_on_cluster)
    tasks = [rpc.send(f"t{n}") for n in range(3)]
    migration = Migration(redis_cluster, tenant_prefix("acme")).start()
    try:
        migration.move(task_key("acme", tasks[1]["id"]))
        listed = rpc.result("ListTasks", {})
        assert [t["id"] for t in listed["tasks"]] == [t["id"] for t in reversed(tasks)]
        assert migration.errors("ASK") > 0
        assert rpc.result("GetTask", {"id": tasks[1]["id"]})["id"] == tasks[1]["id"]
    finally:
        migration.undo()


def test_a_run_listed_while_the_hubs_slot_migrates_lets_the_migration_finish(
        redis_cluster, hub_on_cluster):
    """Before: a message sent while the hub's slot migrated, its replica's runs still on the
    old owner and ``replicas`` moved, was answered ASK for ``replicas`` only, and both
    commands were sent again to the importing node: the run listed in a second ``runs`` key
    there, so redis-cli's MIGRATE of the first failed (BUSYKEY: the reshard stops with the
    slot open), or with ``--cluster-replace`` dropped the run from where the sweep looks.
    Now only the command answered ASK is sent there."""
    rpc = HubClient(hub_on_cluster)
    held = rpc.send("hold g-reshard-runs", configuration={"returnImmediately": True},
                    agent="held")
    replica = hub_on_cluster.store.replica
    migration = Migration(redis_cluster, HUB).start()
    try:
        migration.move(REPLICAS)
        task = rpc.send("while the hub's slot moves")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert runs_key(replica) not in migration.moved()
        migration.finish()               # every key moved: no BUSYKEY
        assert any(held["id"] in run for run in migration.dst.zrange(runs_key(replica), 0, -1))
        rpc.result("CancelTask", {"id": held["id"]}, agent="held")
    finally:
        migration.undo()


def _add_primary(cluster) -> _Node:
    """A fourth primary, empty, joined to ``cluster`` (``redis-cli --cluster add-node``) and
    known to every node."""
    port = cluster_port()
    node = _Node(cluster.directory, port, [
        "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
        "--cluster-node-timeout", "2000"])
    cluster.nodes.append(node)               # stopped with the cluster
    wait_until(lambda: _answers(node), timeout=20)
    added = subprocess.run([_binary("redis-cli"), "--cluster", "add-node",
                            f"127.0.0.1:{port}", f"127.0.0.1:{cluster.nodes[0].port}"],
                           capture_output=True, text=True, timeout=20)
    assert added.returncode == 0, added.stdout + added.stderr
    new_id = _node_id(node.client())
    for other in cluster.nodes[:cluster.size]:
        wait_until(lambda other=other: new_id in other.client().execute_command(
            "CLUSTER", "NODES"), timeout=20)
    wait_until(lambda: "cluster_state:ok" in node.client().execute_command("CLUSTER", "INFO"),
               timeout=20)
    return node


def _answers(node) -> bool:
    try:
        return node.client().ping()
    except Exception:  # noqa: BLE001 - not listening yet
        return False


def test_a_slot_moving_to_a_primary_just_added_is_followed(spare_cluster):
    """Before: the first slot moving to a primary just added (``add-node``, then a
    reshard) was answered ASK naming a node no slot map holds yet (it owns none): each read
    of a task of the slot's tenant whose keys had moved answered -32603 until the slot had.
    Now the node the ASK names is asked."""
    cluster = spare_cluster
    hub = create_hub(hub_config(store=cluster.url))
    rpc = HubClient(hub)
    try:
        tasks = [rpc.send(f"t{n}") for n in range(2)]
        added = _add_primary(cluster)
        migration = Migration(cluster, tenant_prefix("acme"), target=added).start()
        migration.move(task_key("acme", tasks[0]["id"]))
        assert rpc.result("GetTask", {"id": tasks[0]["id"]})["id"] == tasks[0]["id"]
        assert [t["id"] for t in rpc.result("ListTasks", {})["tasks"]] == \
            [tasks[1]["id"], tasks[0]["id"]]
        migration.finish()
        task = rpc.send("on the new primary")
        assert task_key("acme", task["id"]) in migration.moved()
    finally:
        close_hub(hub)
        cluster.stop()


def _first_slot_tenant(cluster) -> tuple[str, object]:
    """A tenant name whose slot is the first of a primary's range (a reshard of one slot
    from that primary moves it), and that primary."""
    client = cluster.client()
    try:
        firsts = {first: int(owner[1]) for first, _, owner, *_ in
                  client.execute_command("CLUSTER", "SLOTS")}
    finally:
        client.close()
    name = next(f"scale{n}" for n in range(100_000)
                if key_slot(tenant_prefix(f"scale{n}").encode()) in firsts)
    port = firsts[key_slot(tenant_prefix(name).encode())]
    return name, next(node for node in cluster.nodes if node.port == port)


@pytest.mark.timed
def test_a_scale_out_under_load_answers_every_request_and_keeps_every_task(spare_cluster):
    """A fourth primary added and a tenant's slot resharded to it with redis-cli while
    messages, GetTask, ListTasks and two SubscribeToTask streams of running tasks are in
    flight. Before: messages and ListTasks of the tenant answered -32603 while its slot
    migrated. Now every request is answered, every acknowledged task is read back after,
    each stream gets its final event, and redis-cli's check finds no open slot."""
    cluster = spare_cluster
    tenant, source = _first_slot_tenant(cluster)
    config = hub_config(store=cluster.url)
    config["tenants"][tenant] = {"api_keys": [sha(KEY_SCALE)],
                                 "limits": {"concurrency": 100, "rate_per_minute": 100_000},
                                 "agents": {"echo": agent("demo"),
                                            "held": agent("tests.hub.agents:held")}}
    hub = create_hub(config)
    headers = {"X-API-Key": KEY_SCALE}
    acknowledged, failures, stop = [], [], threading.Event()
    try:
        rpc = HubClient(hub, headers=headers)
        acknowledged += [rpc.send(f"pre {n}")["id"] for n in range(200)]
        streams = []
        for n in range(2):
            held = HubClient(hub, "held", headers).send(
                f"g-scale-{n}", configuration={"returnImmediately": True})
            reader = Reader(HubClient(hub, "held", headers).call(
                "SubscribeToTask", {"id": held["id"]}, buffered=False))
            assert reader.read()[0]["result"]["task"]["id"] == held["id"]
            streams.append(reader)

        def load(method):
            client = HubClient(hub, headers=headers)
            while not stop.is_set():
                params = send_params("x") if method == "SendMessage" else \
                    {"id": acknowledged[0]} if method == "GetTask" else {"pageSize": 20}
                payload = client.call(method, params).get_json()
                if "error" in payload:
                    failures.append((method, payload["error"]))
                elif method == "SendMessage":
                    acknowledged.append(payload["result"]["task"]["id"])

        threads = [threading.Thread(target=load, args=(m,)) for m in
                   ("SendMessage", "SendMessage", "GetTask", "ListTasks")]
        for thread in threads:
            thread.start()
        added = _add_primary(cluster)
        count = len(acknowledged)
        moved = subprocess.run(
            [_binary("redis-cli"), "--cluster", "reshard", f"127.0.0.1:{source.port}",
             "--cluster-from", _node_id(source.client()), "--cluster-to",
             _node_id(added.client()), "--cluster-slots", "1", "--cluster-yes"],
            capture_output=True, text=True, timeout=30)
        assert moved.returncode == 0, moved.stdout + moved.stderr
        wait_until(lambda: len(acknowledged) >= count + 20 or failures)
        stop.set()
        for thread in threads:
            thread.join(10)
        assert failures == []
        assert _primary_of(cluster, tenant_prefix(tenant)).port == added.port
        for task_id in acknowledged:
            assert rpc.result("GetTask", {"id": task_id})["id"] == task_id
        for n, reader in enumerate(streams):
            gate(f"g-scale-{n}").set()
            last = reader.until_end()[-1]
            assert last["result"]["statusUpdate"]["status"]["state"] == \
                "TASK_STATE_COMPLETED", last
        check = subprocess.run([_binary("redis-cli"), "--cluster", "check",
                                f"127.0.0.1:{added.port}"], capture_output=True, text=True,
                               timeout=30)
        assert check.returncode == 0 and "[OK] All 16384 slots covered" in check.stdout, \
            check.stdout
    finally:
        stop.set()
        close_hub(hub)
        cluster.stop()
