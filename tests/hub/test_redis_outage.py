"""Redis misbehaving under a hub: what a replica does once Redis is back after an outage.

Each test starts its own redis-server (tests/redis_util.py), as it stops or flushes it.
"""
from __future__ import annotations

import json
import os
import signal

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub import replica as replica_module

from tests.hub.agents import gate
from tests.hub.conftest import FAST, KEY_B, HubClient, hub_config, send_params, wait_until
from tests.redis_util import RedisServer


def _state(rpc, task_id):
    return rpc.result("GetTask", {"id": task_id})["status"]["state"]


def _failed_turn(replica) -> bool:
    """One turn of ``replica``'s maintenance (its thread stopped: driven here); whether it
    found the store unavailable."""
    replica._turn(replica._tick)
    return replica._failing


def _stalled(server, replicas) -> None:
    """Redis stopped (SIGSTOP) until each of ``replicas`` (in order; one may come twice)
    has had a turn fail, each within ``timeout_secs``; then answering again (SIGCONT)."""
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        for replica in replicas:
            wait_until(lambda replica=replica: _failed_turn(replica), timeout=5)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


def test_a_live_replicas_run_outlives_an_outage_longer_than_its_liveness(tmp_path):
    """Redis stalls (SIGSTOP) longer than ``redis.liveness_secs``: every replica's liveness
    key has expired when it answers again. The first replica whose turn comes then must not
    take the others for dead: they renew at their next turn, and their runs go on."""
    server = RedisServer(tmp_path).start()
    hubs = [create_hub(hub_config(store=server.url, redis=dict(FAST))) for _ in range(2)]
    a, b = (HubClient(h, "held") for h in hubs)
    try:
        task = a.send("g-outage", configuration={"returnImmediately": True})
        for h in hubs:
            h.replica.stop()                # their turns driven here, B's first once back
        # Each turn fails within timeout_secs (0.5 s), past A's liveness (0.3 s).
        _stalled(server, [h.replica for h in hubs])
        assert not _failed_turn(b.hub.replica)          # B answers again first: its sweep
        assert not _failed_turn(a.hub.replica)          # … then A renews
        assert not _failed_turn(b.hub.replica)
        assert _state(b, task["id"]) == "TASK_STATE_WORKING"
        assert a.hub.runs.get(task["id"]) is not None and not a.hub.runs.get(task["id"]).ended
        gate("g-outage").set()
        wait_until(lambda: _state(b, task["id"]) == "TASK_STATE_COMPLETED", timeout=5)
    finally:
        gate("g-outage").set()
        for h in hubs:
            h.close(drain_timeout=2)
        server.stop()


def _past_the_lease(server, hub, client, task_id, state, second_id):
    """Redis stopped for two of the replica's turns, each failing within timeout_secs
    (0.5 s): past the lease (0.6 s). Then the replica's turn passes, the task stands in
    ``state``, and ``client``'s next message (``second_id``) is REJECTED: the slot is held."""
    hub.replica.stop()                      # its turns driven here
    _stalled(server, [hub.replica] * 2)
    assert not _failed_turn(hub.replica)
    assert _state(client, task_id) == state
    second = client.send(second_id, configuration={"returnImmediately": True})
    assert second["status"]["state"] == "TASK_STATE_REJECTED", second["status"]


def test_a_runs_slot_is_held_again_after_an_outage_longer_than_its_lease(tmp_path):
    """A run's admission lease (2 × ``redis.liveness_secs``) lapses while Redis stalls longer
    than it: once Redis is back, the run's replica renews it, and the tenant's bound
    (globex: one run at once) holds again: the next message is REJECTED, not a second
    run."""
    server = RedisServer(tmp_path).start()
    hub = create_hub(hub_config(store=server.url, redis=dict(FAST)))
    globex = HubClient(hub, "held", headers={"X-API-Key": KEY_B})
    try:
        task = globex.send("g-lease", configuration={"returnImmediately": True})
        # the run's lease renewed: the next message is refused
        _past_the_lease(server, hub, globex, task["id"], "TASK_STATE_WORKING", "g-lease-2")
    finally:
        gate("g-lease").set()
        gate("g-lease-2").set()
        hub.close(drain_timeout=2)
        server.stop()


def test_an_overdue_runs_slot_is_held_again_after_an_outage_longer_than_its_lease(tmp_path):
    """As above, the run past its timeout first while its agent executes on (overdue: its
    slot held under a member of its own, its task ended): once Redis is back, the run's
    replica takes that slot again, and globex's next message is REJECTED while the agent
    executes."""
    server = RedisServer(tmp_path).start()
    config = hub_config(store=server.url, redis=dict(FAST))
    config["tenants"]["globex"]["limits"]["run_timeout_secs"] = 0.2
    hub = create_hub(config)
    globex = HubClient(hub, "stubborn", headers={"X-API-Key": KEY_B})
    try:
        task = globex.send("g-overdue", configuration={"returnImmediately": True})
        wait_until(lambda: any(m.startswith("overdue:") for _, m in hub.runs.leases()),
                   timeout=5)                  # past its timeout: overdue
        # the overdue slot taken again: the next message is refused
        _past_the_lease(server, hub, globex, task["id"], "TASK_STATE_FAILED", "g-overdue-2")
    finally:
        gate("g-overdue").set()
        gate("g-overdue-2").set()
        hub.close(drain_timeout=2)
        server.stop()


def test_a_stream_whose_task_is_flushed_under_it_ends_with_the_stores_error(tmp_path,
                                                                           monkeypatch):
    """Redis flushed (FLUSHALL) under an open SubscribeToTask of a running task, its
    connections kept: no event is announced any more, yet the stream ends with -32603 (docs:
    "a log gone … with the task itself (a Redis flushed …) ends the stream with -32603")
    once the worker renews its watch of the task and finds its record gone, not at the
    stream's lifetime."""
    import threading

    from murmur_wsgi.hub.store import redis_events

    monkeypatch.setattr(redis_events, "REWATCH_SECS", 0.0)   # each turn renews the watch
    server = RedisServer(tmp_path).start()
    hub = create_hub(hub_config(store=server.url, redis=dict(FAST)))
    held = HubClient(hub, "held")
    rest = []
    try:
        task = held.send("g-flushed", configuration={"returnImmediately": True})
        chunks = iter(held.call("SubscribeToTask", {"id": task["id"]},
                                buffered=False).response)
        assert b"TASK_STATE_WORKING" in next(chunks)
        server.client().flushall()
        reader = threading.Thread(target=lambda: rest.append(b"".join(chunks).decode()),
                                  daemon=True)
        reader.start()
        reader.join(5)
        assert rest, "the stream is still open"
        assert '"code":-32603' in rest[0] and "store is unavailable" in rest[0]
    finally:
        gate("g-flushed").set()
        hub.close(drain_timeout=2)
        server.stop()


def test_a_message_whose_acceptance_reply_is_lost_still_runs(tmp_path):
    """The connection closes before the reply of the script that accepts a message (OPEN:
    the messageId's claim, the task's creation and start) though Redis ran it: the hub
    sends it once more on a new connection, which finds the claim its first send took.
    That is this message's own task: it runs and ends, not answered as a message sent
    before, its task WORKING with no run anywhere."""
    import hashlib

    from murmur_wsgi.hub.store.redis_scripts import OPEN
    from tests.hub.cut_util import Cutter

    server = RedisServer(tmp_path).start()
    cutter = Cutter(server.port).start()
    hub = create_hub(hub_config(store=cutter.url, redis=dict(FAST)))
    rpc = HubClient(hub, "echo")
    try:
        rpc.send("warm")                            # the script is loaded, connections made
        cutter.cut(hashlib.sha1(OPEN.encode()).hexdigest().encode())
        task = rpc.send("hello")
        assert cutter.cuts == 1
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
        assert task["artifacts"][0]["parts"][0]["text"] == "hello"
    finally:
        hub.close(drain_timeout=2)
        cutter.close()
        server.stop()


def test_a_runs_end_whose_reply_is_lost_is_still_its_own_end(tmp_path):
    """The connection closes before the reply of the script that ends a run (END) though
    Redis ran it: sent once more, it finds the task ended, by this very end. The sender's
    stream gets every event of that end (the answer's last chunk, then the final status),
    as the task's log holds them, not only the final status as for an end written
    elsewhere."""
    import hashlib

    from murmur_wsgi.hub.store.redis_scripts import END
    from tests.hub.conftest import sse_events
    from tests.hub.cut_util import Cutter

    server = RedisServer(tmp_path).start()
    cutter = Cutter(server.port).start()
    hub = create_hub(hub_config(store=cutter.url, redis=dict(FAST)))
    rpc = HubClient(hub, "tokens")
    try:
        rpc.send("warm up")                         # the script is loaded, connections made
        cutter.cut(hashlib.sha1(END.encode()).hexdigest().encode())
        streamed = [e["result"] for e in sse_events(
            rpc.call("SendStreamingMessage", send_params("hello big world")))]
        assert cutter.cuts == 1
        task_id = streamed[0]["task"]["id"]
        logged = [json.loads(e.payload) for e in hub.store.events(task_id, 0, 0)[0]]
        last = [e["artifactUpdate"] for e in streamed if "artifactUpdate" in e][-1]
        assert last["lastChunk"] is True and "usage" in json.dumps(last)
        assert streamed[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert streamed[-2:] == logged[-2:]
    finally:
        hub.close(drain_timeout=2)
        cutter.close()
        server.stop()


def test_a_refused_messages_task_whose_reply_is_lost_is_answered_once(tmp_path):
    """The connection closes before the reply of the script that stores a refused
    message's task (CREATE, REJECTED: globex runs one task at once) though Redis ran it:
    sent once more, it finds the task it created. The client gets that task, not -32603
    with an orphan task stored (and a second one when it sends the message again)."""
    import hashlib

    from murmur_wsgi.hub.store.redis_scripts import CREATE
    from tests.hub.cut_util import Cutter

    server = RedisServer(tmp_path).start()
    cutter = Cutter(server.port).start()
    hub = create_hub(hub_config(store=cutter.url, redis=dict(FAST)))
    globex = HubClient(hub, "held", headers={"X-API-Key": KEY_B})
    try:
        globex.send("g-created", configuration={"returnImmediately": True})
        globex.send("g-created")                    # refused: the script loaded
        cutter.cut(hashlib.sha1(CREATE.encode()).hexdigest().encode())
        refused = globex.send("g-created")
        assert cutter.cuts == 1
        assert refused["status"]["state"] == "TASK_STATE_REJECTED"
        assert globex.result("ListTasks", {})["totalSize"] == 3
        assert globex.result("GetTask", {"id": refused["id"]})["status"] == refused["status"]
    finally:
        gate("g-created").set()
        hub.close(drain_timeout=2)
        cutter.close()
        server.stop()


def test_a_blocking_send_whose_end_cannot_be_written_answers_the_stores_error(tmp_path):
    """A blocking SendMessage whose run's end Redis never gets (the connection closes as it
    is sent, and again on the new one) answers -32603, as the sender's stream ends: not
    the task as Redis still holds it, WORKING, though its run has ended. The end is
    written once Redis takes it (the replica's next turn)."""
    import hashlib

    from murmur_wsgi.hub.store.redis_scripts import END
    from tests.hub.cut_util import Cutter

    server = RedisServer(tmp_path).start()
    cutter = Cutter(server.port).start()
    hub = create_hub(hub_config(store=cutter.url, redis=dict(FAST)))
    rpc = HubClient(hub, "echo")
    try:
        rpc.send("warm")                            # the script is loaded, connections made
        cutter.cut(hashlib.sha1(END.encode()).hexdigest().encode(), times=2, before=True)
        answer = rpc.call("SendMessage", send_params("hello")).get_json()
        assert cutter.cuts == 2
        assert answer.get("error") == {"code": -32603, "message": "Internal error: the hub's "
                                   "task store is unavailable; try again shortly"}, answer
        wait_until(lambda: not hub.runs.unwritten, timeout=5)
    finally:
        hub.close(drain_timeout=2)
        cutter.close()
        server.stop()


def test_a_message_redis_has_no_memory_for_is_refused_whole(tmp_path):
    """Redis at ``maxmemory`` (noeviction) refuses the writes that take memory: a message
    gets -32603 and nothing is stored, as a run's end could not be stored either (not a
    task accepted, its run executed, its end refused: WORKING until memory is freed)."""
    server = RedisServer(tmp_path).start()
    hub = create_hub(hub_config(store=server.url, redis=dict(FAST)))
    rpc = HubClient(hub, "echo")
    admin = server.client()
    try:
        rpc.send("warm")                            # the scripts are loaded
        admin.config_set("maxmemory", 1)            # every write that takes memory: OOM
        try:
            refused = rpc.error("SendMessage", send_params(
                "hello", configuration={"returnImmediately": True}))
        finally:
            admin.config_set("maxmemory", 0)
        assert refused == {"code": -32603, "message": "Internal error: the hub's task "
                           "store is unavailable; try again shortly"}
        assert rpc.result("ListTasks", {})["totalSize"] == 1
        assert not hub.runs.in_flight() and not hub.runs.unwritten
    finally:
        admin.close()
        hub.close(drain_timeout=2)
        server.stop()


def test_a_run_whose_task_is_flushed_under_it_answers_the_stores_error(tmp_path):
    """Redis flushed (or restarted empty) while a run goes on: its end finds no task to
    end, and its log holds no final event. A blocking SendMessage answers -32603 and the
    sender's stream ends with it (docs: a log gone with its task ends the stream with
    -32603), not the task as it was accepted (SUBMITTED) nor a stream with no final
    event."""
    import threading

    server = RedisServer(tmp_path).start()
    hub = create_hub(hub_config(store=server.url, redis=dict(FAST)))
    held = HubClient(hub, "held")
    answers = {}
    try:
        def send(method):
            answers[method] = b"".join(held.call(method, send_params("g-gone"),
                                                 buffered=False).response).decode()

        senders = [threading.Thread(target=send, args=(method,), daemon=True)
                   for method in ("SendMessage", "SendStreamingMessage")]
        for sender in senders:
            sender.start()
        wait_until(lambda: len(hub.runs.in_flight()) == 2)
        server.client().flushall()
        gate("g-gone").set()
        for sender in senders:
            sender.join(5)
        unavailable = '{"code":-32603,"message":"Internal error: the hub\'s task store is ' \
                      'unavailable; try again shortly"}'
        assert json.loads(answers["SendMessage"])["error"] == json.loads(unavailable)
        last = answers["SendStreamingMessage"].strip().split("\n\n")[-1]
        assert json.loads(last[len("data: "):])["error"] == json.loads(unavailable), last
    finally:
        gate("g-gone").set()
        hub.close(drain_timeout=2)
        server.stop()


@pytest.mark.parametrize("refused, gap, held", [(True, 6.2, True), (True, 1.0, True),
                                                (False, 1.0, False)])
def test_a_beat_redis_refused_holds_the_sweep(tmp_path, monkeypatch, refused, gap, held):
    """The defaults (liveness 10 s, renewed every third, turns of 1 s): another replica's
    key was last renewed up to 4.33 s before Redis went away, so an outage of 5.7 s can
    lapse it while it lives, and this replica cannot tell how long Redis was away. A beat
    refused since the last one written holds the sweep (``hold_secs``), however short the
    gap, so the live replica renews before any sweep; a beat written in time holds
    nothing. Before, only a gap of two thirds of the liveness (6.67 s) held it: a replica
    back after 6.2 s swept live runs."""
    server = RedisServer(tmp_path).start()
    hub = create_hub(hub_config(store=server.url))
    try:
        replica = hub.replica
        replica.stop()                              # its beat driven here
        replica._refused, replica._sweep_at = refused, 0.0
        monkeypatch.setattr(replica_module.time, "monotonic", lambda: 100.0 + gap)
        replica._beat(100.0 + gap)
        assert replica._sweep_at == (100.0 + gap + replica.hold_secs if held else 0.0)
    finally:
        hub.close(drain_timeout=0)
        server.stop()
