"""What a message costs on Redis, counted by Redis itself (MONITOR), and its round trips.

A blocking SendMessage to an agent that answers at once is two round trips from the
hub, two commands: the OPEN script (the run's place in its replica's runs, the
messageId's claim, admission, the task's creation and start), then the END script, which
frees the tenant's slot and returns the finished task the answer is; the run leaves its
replica's runs at the replica's next beat. A message that OPEN finds sent already, or
that admission refuses, never enters the runs. A tenant with
an admission hook pays one more: the claim, before its hook. A tenant at its cap pays
two more once every ``TRIM_BATCH`` messages, whose end forgets its oldest hundred.
"""
from __future__ import annotations

import uuid

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.redis_keys import REPLICAS, member, runs_key, task_key

from tests.hub.conftest import (KEY_B, HubClient, close_hub, hub_config, send_params,
                                wait_until)

MARK = "round-trips-counted"


def _commands(redis_server, client, params, trips=None) -> tuple[dict, list[str]]:
    """The answer to SendMessage ``params``, and every command a client (not a script)
    sent Redis meanwhile that names its message or its task; ``trips``: a list that gets
    the commands of each round trip of the store's hot paths (``Commands.several``)."""
    commands = client.hub.store._command
    several = commands.several

    def counted(*sent, **options):
        if trips is not None:
            trips.append([command[0] for command in sent])
        return several(*sent, **options)
    watcher = redis_server.client()
    with watcher.monitor() as monitor:
        commands.several = counted
        try:
            answer = client.result("SendMessage", params)
        finally:
            del commands.several
        redis_server.client().echo(MARK)
        seen = []
        while True:
            command = monitor.next_command()
            if command["client_type"] == "lua":
                continue
            if MARK in command["command"]:
                break
            seen.append(command["command"])
    task_id = answer["task"]["id"]
    message_id = params["message"]["messageId"]
    named = [c for c in seen if task_id in c or message_id in c]
    # NOTE: the replica's own turn (every second) may look at a run in flight: its cancel
    # mark and its state. Those are not the message's.
    return answer, [c for c in named if not c.startswith(("EXISTS", "HGET "))]


def test_a_blocking_send_message_is_two_round_trips(redis_server):
    redis_server.flush()
    hub = create_hub(hub_config(store=redis_server.url))
    try:
        client = HubClient(hub)
        assert client.send("warm")["status"]["state"] == "TASK_STATE_COMPLETED"
        trips = []
        answer, commands = _commands(redis_server, client,
                                     send_params("hi", message_id=str(uuid.uuid4())), trips)
        assert answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert [c.split(" ", 1)[0] for c in commands] == ["EVALSHA", "EVALSHA"], commands
        assert trips == [["EVALSHA"], ["EVALSHA"]], trips
        # The answer is the stored task, byte for byte what GetTask reads.
        stored = client.result("GetTask", {"id": answer["task"]["id"]})
        assert answer["task"] == stored
    finally:
        close_hub(hub)


def test_a_tenant_with_an_admission_hook_claims_first(redis_server):
    redis_server.flush()
    hub = create_hub(hub_config(store=redis_server.url))
    try:
        client = HubClient(hub, headers={"X-API-Key": KEY_B})      # globex: a hook
        answer, commands = _commands(redis_server, client,
                                     send_params("hi", message_id=str(uuid.uuid4())))
        assert answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert [c.split(" ", 1)[0] for c in commands] == ["SET", "EVALSHA", "EVALSHA"], \
            commands
    finally:
        close_hub(hub)


def test_at_its_cap_a_tenant_s_message_is_still_two_round_trips(redis_server):
    redis_server.flush()
    # A cap of 20: its ends forget 2 at a time (a tenth of it); the sweep is left out.
    hub = create_hub(hub_config(store=redis_server.url, tasks={"max_per_tenant": 20},
                                redis={"sweep_interval_secs": 3600}))
    try:
        client = HubClient(hub)
        for i in range(22):         # the last end forgets a batch (its scripts loaded): 20
            client.send(f"warm {i}")
        assert client.result("ListTasks", {})["totalSize"] == 20
        trips = []
        answer, _ = _commands(redis_server, client,
                              send_params("hi", message_id=str(uuid.uuid4())), trips)
        assert answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        # Past its cap by fewer than a batch: the end forgets nothing yet.
        assert trips == [["EVALSHA"], ["EVALSHA"]], trips
        assert client.result("ListTasks", {})["totalSize"] == 21
        # The next end makes a whole batch: it forgets the oldest two, in two more.
        trips = []
        _commands(redis_server, client, send_params("hi", message_id=str(uuid.uuid4())), trips)
        assert trips == [["EVALSHA"], ["EVALSHA"], ["HMGET", "HMGET"], ["EVALSHA"]], trips
        assert client.result("ListTasks", {})["totalSize"] == 20
    finally:
        close_hub(hub)


def test_the_run_enters_its_replica_s_runs_with_its_task_and_only_then(redis_server):
    """The OPEN script lists the run in its replica's runs (and the replica in
    ``replicas``) as it creates the task; a messageId sent again, or a message admission
    refuses, adds nothing there (the beat that takes ended runs out is left out)."""
    redis_server.flush()
    hub = create_hub(hub_config(store=redis_server.url, limits={"concurrency": 1},
                                redis={"liveness_secs": 3600}))
    try:
        client = HubClient(hub)
        runs = runs_key(hub.store.replica)
        redis = redis_server.client()
        params = send_params("hi", message_id=str(uuid.uuid4()))
        task = client.result("SendMessage", params)["task"]
        assert redis.zrange(runs, 0, -1) == [member("acme", task["id"])]
        assert redis.sismember(REPLICAS, hub.store.replica)
        assert client.result("SendMessage", params)["task"]["id"] == task["id"]   # again
        held = client.send("/sleep 30", configuration={"returnImmediately": True})  # the slot
        refused = client.send("hi")
        assert refused["status"]["state"] == "TASK_STATE_REJECTED"
        assert sorted(redis.zrange(runs, 0, -1)) == sorted([member("acme", task["id"]),
                                                            member("acme", held["id"])])
        client.result("CancelTask", {"id": held["id"]})
    finally:
        close_hub(hub)


def test_a_beat_takes_out_more_ended_runs_than_lua_unpacks_at_once(redis_server):
    """The beat's ``LEAVE`` script takes ten thousand runs that ended since the last beat out
    of the runs (a busy replica's few seconds); before, its one ZREM of them all failed
    ("too many results to unpack" past about 8,000), and so did every beat after."""
    redis_server.flush()
    hub = create_hub(hub_config(store=redis_server.url))
    try:
        hub.replica.stop()
        store, redis = hub.store, redis_server.client()
        ended = [member("acme", f"t{n}") for n in range(10_000)]
        pipe = redis.pipeline(transaction=False)
        for n, found in enumerate(ended):
            pipe.zadd(runs_key(store.replica), {found: n})
            pipe.hset(task_key("acme", f"t{n}"), "state", "TASK_STATE_COMPLETED")
        pipe.execute()
        store._left.extend(ended)
        hub.replica.store.heartbeat()
        assert redis.zcard(runs_key(store.replica)) == 0
        assert store._left == [] and store._unended == []
    finally:
        close_hub(hub)


def test_a_redis_that_keeps_a_script_to_one_slot_lists_the_run_first(tmp_path, caplog):
    """A ``redis://`` URL naming a Redis that refuses a script keys of two slots (here a
    cluster node that owns every slot): the first OPEN is refused whole (CROSSSLOT) and sent
    again after the run's place in its replica's runs, as every OPEN after it is (said
    once in the log); the messages are answered."""
    from tests.redis_topologies import cluster_port
    from tests.redis_util import RedisServer

    server = RedisServer(tmp_path / "node", port=cluster_port(), extra=(
        "--cluster-enabled", "yes", "--cluster-config-file", str(tmp_path / "nodes.conf"))
    ).start()
    try:
        node = server.client()
        node.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        wait_until(lambda: "cluster_state:ok" in node.execute_command("CLUSTER", "INFO"))
        hub = create_hub(hub_config(store=server.url, redis={"liveness_secs": 3600}))
        try:
            client = HubClient(hub)
            # the first: refused, sent again (the scripts loaded meanwhile), answered
            assert client.send("first")["status"]["state"] == "TASK_STATE_COMPLETED"
            assert len([r for r in caplog.records if "one slot" in r.getMessage()]) == 1
            trips = []
            answer, _ = _commands(server, client,
                                  send_params("second", message_id=str(uuid.uuid4())), trips)
            assert answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            assert trips == [["ZADD", "SADD", "EVALSHA"], ["EVALSHA"]], trips
            assert len(node.zrange(runs_key(hub.store.replica), 0, -1)) == 2
            assert len([r for r in caplog.records if "one slot" in r.getMessage()]) == 1
        finally:
            close_hub(hub)
    finally:
        server.stop()
