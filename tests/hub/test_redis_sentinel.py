"""The hub's store behind Sentinel: ``store: redis-sentinel://…/murmur/0``, and ``wait_replicas``.

One real set for the module (tests/redis_topologies.py: a primary, one replica, three
sentinels). The tests run in order: a WAIT that too few replicas answer, then a primary
demoted while the store's connections are open to it (``SENTINEL FAILOVER``: it lives
on as the replica). A failover the sentinels call themselves has a set of its own: the
primary SIGKILLed under a burst of SendMessages, or paused and back.
"""
from __future__ import annotations

import os
import signal
import threading
import time
import types
import uuid

import pytest
import redis

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config import load_config
from murmur_wsgi.hub.config_schema import ConfigError
from murmur_wsgi.hub.store import StoreError, redis_sentinels, redis_stores
from murmur_wsgi.hub.store.redis_client import connect
from murmur_wsgi.hub.store.redis_commands import Commands, Unreplicated
from murmur_wsgi.hub.store.redis_keys import EVENTS, task_key
from murmur_wsgi.hub.store.redis_sentinels import (PROMISE_SECS, aborted, follow_primary,
                                                    promised, selected, switched_to)
from murmur_wsgi.hub.store.sentinel_url import parse
from tests.hub.agents import gate
from tests.hub.conftest import (HubClient, close_hub, hub_config, replica_turn, send_params,
                                wait_until)
from tests.hub.test_streams import Reader
from tests.redis_sentinels import SERVICE, SentinelSet
from tests.redis_topologies import wait_until as redis_wait

pytestmark = pytest.mark.one_store

STORE_ERROR = -32603


# NOTE: a primary the test stops is judged down half a second after it stops answering
# (the set's default is a second), still far longer than a PING takes one under a burst.
DOWN_AFTER_MS = 500


@pytest.fixture(scope="module")
def sentinels(tmp_path_factory):
    started = SentinelSet(tmp_path_factory.mktemp("sentinel"), quick=True).start()
    yield started
    started.stop()


@pytest.fixture
def own_sentinels(tmp_path):
    """A set of the test's own, for a failover the sentinels call themselves: a sentinel
    that voted in one starts none for twice its failover-timeout (10 s) after it, and
    the module's set, judging down within half a second, called failovers back and forth
    after its demotion (the old primary made a replica while they watched)."""
    started = SentinelSet(tmp_path / "sentinel", down_after_ms=DOWN_AFTER_MS,
                          quick=True).start()
    yield started
    started.stop_soon()


def _pooled(hub, task: dict) -> None:
    """Several idle connections in the hub's pool: four threads reading ``task`` at once."""
    def burst():
        reader = HubClient(hub)
        for _ in range(10):
            reader.result("GetTask", {"id": task["id"]})

    threads = [threading.Thread(target=burst) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert hub.store.conn.command.idle >= 2


def _send(client: HubClient, text: str = "hi", **kwargs):
    return client.call("SendMessage", send_params(text, **kwargs))


def _swap_roles(sentinels: SentinelSet) -> None:
    """After a failover that kept the old primary alive: it is the replica now, in sync.

    The old primary is sent what Sentinel sends it in its own time (it waits 8 s after the
    role change and asks a replica's INFO every 10 s: 10-20 s idle), in one transaction:
    REPLICAOF the new primary, then CLIENT KILL of its normal and pub/sub clients.
    """
    sentinels.primary, sentinels.replica = sentinels.replica, sentinels.primary
    node = sentinels.replica
    demoted = node.client()
    try:
        demote = demoted.pipeline(transaction=True)
        demote.execute_command("REPLICAOF", "127.0.0.1", str(sentinels.primary.port))
        demote.execute_command("CLIENT", "KILL", "TYPE", "normal")
        demote.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        demote.execute()
    finally:
        demoted.close()
    redis_wait(lambda: node.client().info("replication").get("master_link_status") == "up",
               "the demoted primary's link to the new one", [node.proc])


def test_the_url_names_sentinels_service_and_db_and_the_config_takes_it():
    parts = parse("redis-sentinel://:s%40cret@10.0.0.1:26379,[::1]:26380/orders/2")
    assert parts.sentinels == (("10.0.0.1", 26379), ("::1", 26380))
    assert (parts.service, parts.db, parts.username, parts.password) == \
        ("orders", 2, None, "s@cret")
    assert parse("redis-sentinel://h:1/murmur").db == 0
    config = load_config({}, {"MURMUR_HUB_REDIS_URL": "redis-sentinel://h:1/murmur/0",
                              "MURMUR_HUB_REDIS_WAIT_REPLICAS": "1"})
    assert config.store == "redis" and config.store_url().startswith("redis-sentinel://")
    assert config.redis["wait_replicas"] == 1
    assert load_config({}).redis["wait_replicas"] == 0
    for bad, says in [("redis-sentinel://h:1", "names its service"),
                      ("redis-sentinel://h/murmur/0", "HOST:PORT"),
                      ("redis-sentinel://:pw@h:1/murmur/x", "database number")]:
        with pytest.raises(ConfigError) as caught:
            load_config({"store": bad})
        assert says in str(caught.value) and "pw" not in str(caught.value)
    with pytest.raises(ConfigError, match="redis.wait_replicas"):
        load_config({"store": "redis-sentinel://h:1/m/0", "redis": {"wait_replicas": -1}})


@pytest.mark.parametrize("hosts", ["::1:26379", "[::1:26379", "::1]:26379", "[a]b:26379",
                                   "[]:26379", "h:0", "h:65536", "h:+1", "h:1,", "[::1]"])
@pytest.mark.parametrize("scheme", ["redis-sentinel", "rediss-sentinel"])
def test_a_sentinel_host_the_other_forms_refuse_is_refused(scheme, hosts):
    """Each sentinel is HOST:PORT as the other forms read their hosts (an IPv6 address in
    brackets, a port 1-65535): before, ``::1:26379`` and brackets left open or stray were
    taken, ``[a]b`` as the host ``a]b``."""
    with pytest.raises(ConfigError) as caught:
        load_config({"store": f"{scheme}://:pw@{hosts}/murmur/0"})
    assert "HOST:PORT, separated by commas (an IPv6 address in brackets: [::1]:26379)" in \
        str(caught.value) and "pw" not in str(caught.value)


@pytest.mark.timed
@pytest.mark.waits
def test_a_write_too_few_replicas_acknowledge_is_the_stores_error(sentinels):
    client = connect(sentinels.url, 2.0)
    assert client.connection_pool.connection_class.__name__ == "_SentinelConnection"
    one, two = (Commands(client, replicas=n, replicas_ms=100) for n in (1, 2))
    try:
        # WAIT travels with its write: one connection, one round trip, the answer kept.
        assert one.durable("SET", "k", "v") == "OK"
        assert one.script("return redis.call('INCR', KEYS[1])", durable=True)(keys=["n"]) == 1
        started = time.monotonic()
        with pytest.raises(Unreplicated):
            two.durable("SET", "k", "w")
        assert 0.08 < time.monotonic() - started < 2.0    # its own wait, not the socket's
        assert client.get("k") == "w"                 # done on the primary all the same
    finally:
        one.close()
        two.close()
        client.close()
    stores = redis_stores(sentinels.url, timeout_secs=0.5, wait_replicas=2)
    try:
        # A claim does not wait (its task's creation does); a cancel mark does.
        assert stores.tasks.claim_message("acme", "echo", uuid.uuid4().hex) is None
        with pytest.raises(StoreError):
            stores.tasks.mark_cancel(str(uuid.uuid4()), tenant="acme")
    finally:
        stores.close()
    hub = create_hub(hub_config(store=sentinels.url,
                                redis={"wait_replicas": 2, "timeout_secs": 0.5}))
    try:
        response = _send(HubClient(hub))
        assert response.status_code == 200
        error = response.get_json()["error"]
        assert error["code"] == STORE_ERROR and "store" in error["message"]
    finally:
        close_hub(hub)


def test_a_call_that_finds_every_pooled_connection_in_use_waits_for_one(sentinels):
    """The pool of the sentinels' primary lends at most its bound: one more call waits until
    a connection comes back (redis-py's Sentinel pool raised ``MaxConnectionsError`` at
    once), and past ``timeout_secs`` it fails as Redis being away does."""
    client = connect(sentinels.url, 1.0)
    pool = client.connection_pool
    held = [pool.get_connection() for _ in range(pool.max_connections)]
    try:
        answered = []
        waiting = threading.Thread(target=lambda: answered.append(_set_or_error(client)))
        waiting.start()
        wait_until(lambda: answered or pool.waiting == 1, timeout=5)
        pool.release(held.pop())
        waiting.join(10)
        assert answered == [True]
        held.append(pool.get_connection())
        with pytest.raises(redis.ConnectionError):
            client.set("k", "late")
    finally:
        for conn in held:
            pool.release(conn)
        client.close()


def test_a_lone_sentinel_answers_every_primary_connection_connecting_at_once(sentinels):
    """Each primary connection asks a sentinel as it connects, holding a connection of that
    sentinel's client: the pool's and the hot paths' may all connect at once, twice
    ``max_connections``. redis-py's own bound there (100) refused the 101st at once, and a
    lone sentinel refusing left the connect no primary (``MasterNotFoundError``)."""
    lone = f"redis-sentinel://127.0.0.1:{sentinels.sentinels[0].port}/{SERVICE}/0"
    client = connect(lone, 2.0, max_connections=64)
    watcher = client.connection_pool.sentinel_manager.sentinels[0].connection_pool
    held = []
    try:
        held.extend(watcher.get_connection() for _ in range(2 * 64 - 1))
        assert client.ping() is True
    finally:
        for conn in held:
            watcher.release(conn)
        client.close()
        watcher.disconnect()


def _set_or_error(client):
    try:
        return client.set("k", "v")
    except redis.RedisError as ex:
        return ex


def test_a_connection_sent_to_a_replica_is_refused_as_it_connects(sentinels):
    """A sentinel that has not heard of a failover names the old primary, back as a
    replica: a connection there would read a replica's data. It asks the node's ROLE."""
    client = connect(sentinels.url, 2.0)
    pool = client.connection_pool
    to_replica = pool.connection_class(**pool.connection_kwargs)
    to_primary = pool.connection_class(**pool.connection_kwargs)
    try:
        with pytest.raises(redis.ConnectionError, match="is not the primary now"):
            to_replica.connect_to(("127.0.0.1", sentinels.replica.port))
        assert to_replica._sock is None                 # nothing left to read from
        to_primary.connect_to(("127.0.0.1", sentinels.primary.port))
        to_primary.send_command("ROLE")
        assert to_primary.read_response()[0] == "master"
    finally:
        to_replica.disconnect()
        to_primary.disconnect()
        client.close()


def test_a_demoted_primarys_connections_follow_the_new_one(sentinels):
    client = connect(sentinels.url, 2.0)
    command = Commands(client)
    pubsub = client.pubsub()
    try:
        assert command("SET", "before", "1") == "OK"         # a connection to the primary
        old = sentinels.primary_port()
        sentinels.sentinels[0].client().execute_command("SENTINEL", "FAILOVER", SERVICE)
        assert sentinels.wait_failover() != old
        _swap_roles(sentinels)
        # The idle connection still talks to the old primary: READONLY, as a failed
        # connection, sent once more on a new one, to the primary the sentinels name.
        assert command.idle == 1
        assert command("SET", "after", "2") == "OK"
        assert client.set("pooled", "3") is True
        assert sentinels.primary.client().get("after") == "2"
        assert client.connection_pool.get_master_address()[1] == sentinels.primary.port
    finally:
        pubsub.close()
        command.close()
        client.close()


@pytest.mark.timed
def test_a_failover_under_load_keeps_every_acknowledged_task(own_sentinels):
    sentinels = own_sentinels
    hub = create_hub(hub_config(store=sentinels.url,
                                redis={"wait_replicas": 1, "timeout_secs": 1.0}))
    acknowledged, answers, stop = [], [], threading.Event()

    def load():
        client = HubClient(hub)
        while not stop.is_set():
            response = _send(client, "burst")
            payload = response.get_json() if response.status_code == 200 else None
            answers.append((response.status_code, payload))
            if payload and "result" in payload:
                task = payload["result"]["task"]
                acknowledged.append((task["id"], task["status"]["state"]))

    rpc = HubClient(hub)
    rpc.agent = "held"
    held = rpc.send("g-sentinel", configuration={"returnImmediately": True})
    reader = Reader(rpc.call("SubscribeToTask", {"id": held["id"]}, buffered=False))
    assert reader.read()[0]["result"]["task"]["id"] == held["id"]
    streamed = threading.Thread(target=reader.until_end, daemon=True)
    streamed.start()
    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(acknowledged) >= 20)
        sentinels.kill_primary()
        killed = time.monotonic()
        wait_until(lambda: any(p and "error" in p for _, p in answers[-20:]), 10.0)
        sentinels.wait_failover()
        # NOTE: wait_replicas 1 needs a replica of the new primary: the old one, restarted.
        sentinels.rejoin()
        count = len(acknowledged)
        wait_until(lambda: len(acknowledged) >= count + 10, 10.0)   # answering by itself
        back = time.monotonic() - killed
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    try:
        assert back < 10.0, back
        assert {status for status, _ in answers} == {200}
        errors = {p["error"]["code"] for _, p in answers if "error" in p}
        assert errors == {STORE_ERROR}
        promoted = sentinels.primary.client()
        missing = [t for t, _ in acknowledged if not promoted.exists(task_key("acme", t))]
        assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged tasks lost"
        for task_id, told in acknowledged:
            assert rpc.result("GetTask", {"id": task_id}, agent="echo")["status"]["state"] \
                == told
        gate("g-sentinel").set()
        streamed.join(15)
        assert not streamed.is_alive()
        last = reader.events[-1]
        assert ("error" in last and last["error"]["code"] == STORE_ERROR) or \
            last["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", last
        # The one listener subscribed again on the new primary: a new stream runs live.
        wait_until(lambda: hub.store.conn.feed.subscribed, 10.0)
        after = rpc.send("g-sentinel-after", configuration={"returnImmediately": True})
        again = Reader(rpc.call("SubscribeToTask", {"id": after["id"]}, buffered=False))
        assert again.read()[0]["result"]["task"]["id"] == after["id"]
        gate("g-sentinel-after").set()
        ended = again.until_end()[-1]
        assert ended.get("result", {}).get("statusUpdate", {}).get("status", {}).get(
            "state") == "TASK_STATE_COMPLETED", ended
    finally:
        reader.close()
        close_hub(hub)


@pytest.mark.timed
@pytest.mark.waits
def test_an_old_primary_back_after_a_failover_is_written_to_no_more(own_sentinels):
    """The primary paused (SIGSTOP: a host cut off) while the sentinels promote its replica,
    then back: a primary still, until they demote it seconds later, and what is written
    to it then is dropped. The connections the hub made before are retired once its
    listener reached the new primary: every message acknowledged after is there."""
    sentinels = own_sentinels
    hub = create_hub(hub_config(store=sentinels.url, redis={"timeout_secs": 1.0}))
    old = sentinels.primary
    try:
        client = HubClient(hub)
        task = client.send("before")
        _pooled(hub, task)                              # connections made before the pause
        os.kill(old.proc.pid, signal.SIGSTOP)
        try:
            sentinels.wait_failover()
            new = sentinels.replica.client()
            # The listener reconnects once the paused primary stops answering: to the new one.
            wait_until(lambda: new.pubsub_numsub(EVENTS)[0][1] >= 1, 10.0)
        finally:
            os.kill(old.proc.pid, signal.SIGCONT)
        assert old.client().info("replication")["role"] == "master"    # back, not demoted yet
        acknowledged = [client.send("after")["id"] for _ in range(20)]
        missing = [t for t in acknowledged if not new.exists(task_key("acme", t))]
        assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged tasks lost"
    finally:
        close_hub(hub)


def test_a_graceful_failover_is_followed_before_the_old_primary_is_demoted(own_sentinels):
    """``SENTINEL FAILOVER``: the replica promoted, the old primary answers as a primary
    until the sentinels demote it (8-20 s later), and drops what was written to it then.
    The replica's next turn asks the sentinels which primary they name and follows it:
    the messages acknowledged after are there, and the listener subscribes there. Before,
    the listener stayed on the old primary until its demotion, the streams hearing
    nothing of the new primary's events (this test's last wait failed), and so did every
    connection no new one retired: under load, what was written meanwhile was lost (62 of
    70 acknowledged tasks, with ``wait_replicas`` 0, in a probe with two replicas)."""
    sentinels = own_sentinels
    hub = create_hub(hub_config(store=sentinels.url, redis={"timeout_secs": 1.0}))
    old = sentinels.primary
    watched = old.client()
    try:
        client = HubClient(hub)
        task = client.send("before")
        _pooled(hub, task)                              # connections to the old primary
        hub.store.conn.start_feed()
        wait_until(lambda: watched.pubsub_numsub(EVENTS)[0][1] >= 1, 10.0)
        sentinels.sentinels[0].client().execute_command("SENTINEL", "FAILOVER", SERVICE)
        sentinels.wait_failover()
        new = sentinels.replica.client()
        assert old.client().info("replication")["role"] == "master"    # not demoted yet
        assert replica_turn(hub)                        # its beat asks the sentinels
        acknowledged = [client.send("after")["id"] for _ in range(5)]
        missing = [t for t in acknowledged if not new.exists(task_key("acme", t))]
        assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged tasks lost"
        wait_until(lambda: new.pubsub_numsub(EVENTS)[0][1] >= 1, 10.0)
    finally:
        watched.close()
        close_hub(hub)


def test_the_sentinels_news_of_a_failover_is_followed_before_the_next_beat(own_sentinels):
    """``SENTINEL FAILOVER`` with the replica's beats far apart (``liveness_secs`` 600: one
    every 200 s): the worker's connection to a sentinel hears its ``+switch-master`` and
    follows the primary it names at once, the old one not yet demoted: the next message
    acknowledged is on the new primary, and the listener subscribes there. Before, only a
    beat asked the sentinels, or a connection the pool made anew: every message of the
    wait below went to the old primary, which drops them at its demotion (about 600 in
    the 4.1 s until the replica's thread made a connection)."""
    sentinels = own_sentinels
    hub = create_hub(hub_config(store=sentinels.url,
                                redis={"timeout_secs": 1.0, "liveness_secs": 600}))
    old = sentinels.primary
    try:
        client = HubClient(hub)
        task = client.send("before")
        _pooled(hub, task)                              # connections to the old primary
        wait_until(lambda: hub.store.conn.news.listening == len(sentinels.sentinels), 10.0)
        sentinels.sentinels[0].client().execute_command("SENTINEL", "FAILOVER", SERVICE)
        sentinels.wait_failover()
        new = sentinels.replica.client()
        assert old.client().info("replication")["role"] == "master"    # not demoted yet
        # NOTE: a sentinel may name the new primary a little before it publishes the switch.
        wait_until(lambda: new.exists(task_key("acme", client.send("after")["id"])), 1.5)
        acknowledged = [client.send("then")["id"] for _ in range(5)]
        missing = [t for t in acknowledged if not new.exists(task_key("acme", t))]
        assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged tasks lost"
        wait_until(lambda: new.pubsub_numsub(EVENTS)[0][1] >= 1, 10.0)
    finally:
        close_hub(hub)


@pytest.fixture(params=[2, 3], ids=["two-replicas", "three-replicas"])
def two_replicas(tmp_path, request):
    """A set of the test's own with several replicas: one promoted, the others made its
    replicas one after the other (the leader names the new primary only once it is done:
    a second each)."""
    started = SentinelSet(tmp_path / "sentinel", down_after_ms=DOWN_AFTER_MS, quick=True,
                          replicas=request.param).start()
    yield started
    started.stop_soon()


def test_a_graceful_failover_loses_no_task_a_replica_not_promoted_acknowledged(two_replicas):
    """``wait_replicas`` 1, two replicas, ``SENTINEL FAILOVER`` under a stream of messages:
    every task acknowledged is on the new primary. From the leader's ``+selected-slave``
    the hub writes to no node but the one it promotes (-32603 meanwhile: 10-16 requests
    over 0.05-0.08 s, whether the leader names it a second after or two). Before, the old
    primary took writes until the hub followed ``+switch-master``, a replica not promoted
    acknowledged them (``WAIT 1``), then dropped them as it followed the new primary (a
    probe under load: 16-19 acknowledged tasks lost)."""
    sentinels = two_replicas
    hub = create_hub(hub_config(store=sentinels.url,
                                redis={"timeout_secs": 1.0, "wait_replicas": 1}))
    old = sentinels.primary.port
    acknowledged, refused, stop = [], [], threading.Event()

    def sender():
        client = HubClient(hub)
        while not stop.is_set():
            answer = _send(client, "during").get_json()
            if "result" in answer:
                acknowledged.append(answer["result"]["task"]["id"])
            else:
                refused.append((answer["error"]["code"], time.monotonic()))

    threads = [threading.Thread(target=sender) for _ in range(2)]
    try:
        HubClient(hub).send("before")
        wait_until(lambda: hub.store.conn.news.listening == len(sentinels.sentinels), 10.0)
        for thread in threads:
            thread.start()
        wait_until(lambda: len(acknowledged) >= 20, 10.0)
        sentinels.sentinels[0].client().execute_command("SENTINEL", "FAILOVER", SERVICE)
        port = redis_wait(lambda: (port := sentinels.primary_port()) != old and port,
                          "a failover", sentinels._procs())
        switched = len(acknowledged)
        wait_until(lambda: len(acknowledged) >= switched + 20, 15.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        close_hub(hub)
    promoted = next(node for node in (sentinels.replica, *sentinels.others)
                    if node.port == port)
    new = promoted.client()
    missing = [t for t in acknowledged if not new.exists(task_key("acme", t))]
    assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged tasks lost"
    assert {code for code, _ in refused} <= {STORE_ERROR}, refused


def test_a_selected_replica_names_a_promise_and_an_abort_ends_it():
    assert selected(b"slave 127.0.0.1:7001 127.0.0.1 7001 @ murmur 127.0.0.1 7000",
                    "murmur") == ("127.0.0.1", 7001)
    assert selected("slave 127.0.0.1:7001 127.0.0.1 7001 @ other 127.0.0.1 7000",
                    "murmur") is None
    assert selected("master murmur 127.0.0.1 7000", "murmur") is None
    assert aborted("master murmur 127.0.0.1 7000", "murmur")
    assert not aborted("master other 127.0.0.1 7000", "murmur")


def test_a_promise_lasts_no_longer_than_its_bound():
    """A promised node is the only one written to until the sentinels name it, or an abort,
    or ``PROMISE_SECS``: a failover whose end the hub did not hear (an abort, another
    failover, while its connections to the sentinels were lost) holds no write for good.
    Before, only a promised node that refused to be a primary gave the promise up."""
    pool = types.SimpleNamespace(promised=("10.0.0.2", 7001), promised_at=time.monotonic())
    assert promised(pool) == ("10.0.0.2", 7001)
    pool.promised_at = time.monotonic() - PROMISE_SECS - 1
    assert promised(pool) is None and pool.promised is None
    # each sentinel's +switch-master of the primary followed already promises nothing
    followed = types.SimpleNamespace(primary=("10.0.0.2", 7001), promised=None)
    redis_sentinels._promise(followed, ("10.0.0.2", 7001))
    assert followed.promised is None


def test_only_a_switch_of_the_hubs_service_names_a_primary():
    """``+switch-master``'s message as a sentinel writes it (bytes or text), for the hub's
    service; another service's, or a message of another shape, names none."""
    assert switched_to(b"murmur 127.0.0.1 7000 127.0.0.1 7001", "murmur") == ("127.0.0.1", 7001)
    assert switched_to("murmur 10.0.0.1 7000 10.0.0.2 7001", "murmur") == ("10.0.0.2", 7001)
    assert switched_to("other 127.0.0.1 7000 127.0.0.1 7001", "murmur") is None
    assert switched_to("murmur 127.0.0.1 7000 127.0.0.1", "murmur") is None
    assert switched_to("murmur 127.0.0.1 7000 127.0.0.1 x", "murmur") is None
    assert switched_to(b"\xff\xfe", "murmur") is None


def test_a_beat_follows_the_primary_the_sentinels_name(own_sentinels):
    """``follow_primary`` (each beat's first step): after ``SENTINEL FAILOVER``, the old
    primary not yet demoted, it finds the sentinels naming another primary, and the idle
    connection to the old one goes to the new one at its next command. Before, it read
    the pool's ``primary`` where the connections do not keep it (their pool is the pool's
    proxy): it never found anything to follow. With no sentinel answering it follows
    nothing and raises nothing (the beat goes on)."""
    sentinels = own_sentinels
    client = connect(sentinels.url, 1.0)
    command = Commands(client)
    old = sentinels.primary
    try:
        assert command("SET", "before", "1") == "OK"     # an idle connection to the old one
        assert not follow_primary(client)
        sentinels.sentinels[0].client().execute_command("SENTINEL", "FAILOVER", SERVICE)
        sentinels.wait_failover()
        assert old.client().info("replication")["role"] == "master"    # not demoted yet
        assert follow_primary(client)
        assert command("SET", "after", "2") == "OK"
        assert sentinels.replica.client().get("after") == "2"
        for sentinel in sentinels.sentinels:
            os.kill(sentinel.proc.pid, signal.SIGSTOP)
        try:
            assert not follow_primary(client)
        finally:
            for sentinel in sentinels.sentinels:
                os.kill(sentinel.proc.pid, signal.SIGCONT)
    finally:
        command.close()
        client.close()


def test_a_closed_hub_leaves_no_connection_open_to_the_sentinels(sentinels):
    """Each of the hub's connections asked a sentinel for the primary, on a connection of
    that sentinel's client: closing the hub closes those too. Before, they stayed open (one
    to each sentinel asked) until the process ended, as an unclosed socket."""
    hub = create_hub(hub_config(store=sentinels.url, redis={"timeout_secs": 1.0}))
    try:
        assert "result" in _send(HubClient(hub)).get_json()
        watchers = hub.store.conn.redis.connection_pool.sentinel_manager.sentinels
        pools = [watcher.connection_pool for watcher in watchers]
        ports = {conn._sock.getsockname()[1] for pool in pools
                 for conn in (*pool._available_connections, *pool._in_use_connections)
                 if conn._sock is not None}            # the hub's ends of its links to them
        assert ports                            # the sentinels were asked
    finally:
        close_hub(hub)

    def open_ports() -> set:
        found = set()
        for node in sentinels.sentinels:
            client = node.client()
            try:
                found |= {int(entry["addr"].rpartition(":")[2])
                          for entry in client.client_list()}
            finally:
                client.close()
        return found & ports
    wait_until(lambda: not open_ports(), timeout=5)
