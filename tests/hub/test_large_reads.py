"""Large task records read off Redis at once are bounded per worker (hub/store/large_reads.py).

Before, each read of a task's record (GetTask, CancelTask, a SubscribeToTask's opening
read) took it whole at once, however large: twenty GetTasks sent together of one 60 MiB
task left a worker at 2.3 GB, though the answers past ``limits.answer_bytes`` were refused
once read. Now a record whose stored forms are large is sent by Redis only once the worker
has room for it (``limits.worker_answer_bytes``), and a small one as before, in one round
trip.
"""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.large_reads import LargeReads, ReadsBusy

from tests.hub.conftest import KEY_B, HubClient, close_hub, hub_config, refused_task

MIB = 1024 ** 2
BUSY = ("Internal error: this worker is reading as many large tasks as it may "
        "(limits.worker_answer_bytes); try again shortly")
TENANT_BUSY = BUSY.replace("worker_answer_bytes", "answer_bytes")


def test_a_read_waits_for_room_and_one_always_fits():
    reads = LargeReads(10, wait_secs=30)
    entered, release, done = threading.Event(), threading.Event(), threading.Event()

    def holder():
        with reads.room(100):               # past the bound: the only read, it fits
            entered.set()
            release.wait(30)

    def waiter():
        with reads.room(5):
            done.set()

    threads = [threading.Thread(target=holder), threading.Thread(target=waiter)]
    threads[0].start()
    assert entered.wait(30)
    threads[1].start()
    assert not done.wait(0.05)              # it waits while the first reads
    assert reads.held == 100
    release.set()
    assert done.wait(30)                    # woken as the first ends, not at its deadline
    for thread in threads:
        thread.join(30)
    assert reads.held == 0


def test_no_room_in_time_is_refused_and_nothing_is_held():
    reads = LargeReads(10, wait_secs=0.05)
    with reads.room(8):
        with pytest.raises(ReadsBusy) as refused:
            with reads.room(5):
                pass
        with reads.room(2):                  # what fits goes on
            assert reads.held == 10
    assert refused.value.error_object() == {"code": -32603, "message": BUSY}
    assert reads.held == 0


def cramped_hub(redis_server):
    """A hub on ``redis_server`` (flushed) whose worker reads 4 MiB of large tasks at once,
    one more waiting 0.3 s for room."""
    redis_server.flush()
    config = hub_config(store=redis_server.url)
    config["redis"] = {"timeout_secs": 0.3}
    config["limits"] = {**config["limits"], "worker_answer_bytes": 4 * MIB}
    return create_hub(config)


@pytest.mark.cluster
def test_a_large_record_is_read_once_the_worker_has_room(redis_server):
    """With the worker's room taken, a GetTask of a large task waits its ``redis.timeout_secs``
    and is -32603; a small task's GetTask (sent whole by the script) and CancelTask of
    an unknown task are answered meanwhile, as is a ListTasks page of the small task alone
    (a page holding the large one waits, then -32603); with room again it is read."""
    hub = cramped_hub(redis_server)
    try:
        acme = HubClient(hub)
        large, small = refused_task(hub, MIB), refused_task(hub, 1000)
        with hub.store.large_reads.room(4 * MIB):
            refused = acme.call("GetTask", {"id": large}).get_json()
            assert refused == {"jsonrpc": "2.0", "id": acme.next_id,
                               "error": {"code": -32603, "message": BUSY}}
            assert acme.result("GetTask", {"id": small})["id"] == small
            assert acme.error("CancelTask", {"id": "nope"})["code"] == -32001
            after = acme.result("ListTasks", {"pageSize": 1})       # the small task's page
            assert [t["id"] for t in after["tasks"]] == [small]
            for params in ({"pageSize": 2}, {"pageSize": 1, "pageToken": after["nextPageToken"]}):
                assert acme.call("ListTasks", params).get_json()["error"] == \
                    {"code": -32603, "message": BUSY}           # a page of the large task
        assert [t["id"] for t in acme.result("ListTasks", {
            "pageSize": 1, "pageToken": after["nextPageToken"]})["tasks"]] == [large]
        assert [t["id"] for t in acme.result("ListTasks", {})["tasks"]] == [small, large]
        task = acme.result("GetTask", {"id": large})
        assert task["history"][0]["parts"][0]["text"] == "x" * MIB
        assert hub.store.large_reads.held == 0
    finally:
        close_hub(hub)



@pytest.mark.cluster
def test_a_tenants_large_reads_leave_room_for_the_others(redis_server):
    """A tenant's large reads at once are at most its ``limits.answer_bytes`` of the worker's
    room: with acme's share taken (its reads in flight, pages of its tasks listed without
    pause), acme's next large read waits and is -32603, and globex's is read at once. Before,
    acme's reads took the worker's whole room, each of globex's waiting behind them."""
    redis_server.flush()
    config = hub_config(store=redis_server.url)
    config["redis"] = {"timeout_secs": 0.3}
    config["limits"] = {**config["limits"], "worker_answer_bytes": 8 * MIB}
    config["tenants"]["acme"]["limits"] = {"answer_bytes": 4 * MIB}
    hub = create_hub(config)
    try:
        acme, globex = HubClient(hub), HubClient(hub, headers={"X-API-Key": KEY_B})
        mine, theirs = refused_task(hub, MIB), refused_task(hub, MIB, tenant="globex")
        reads = hub.store.large_reads
        with reads.room(2 * MIB, "acme"), reads.room(2 * MIB, "acme"):
            assert acme.call("GetTask", {"id": mine}).get_json()["error"] == \
                {"code": -32603, "message": TENANT_BUSY}
            task = globex.result("GetTask", {"id": theirs})
            assert task["history"][0]["parts"][0]["text"] == "x" * MIB
            assert reads.held == 4 * MIB
        assert acme.result("GetTask", {"id": mine})["id"] == mine
        assert reads.held == 0
    finally:
        close_hub(hub)


def test_one_read_of_a_tenant_holding_none_always_fits_its_share(caplog):
    reads = LargeReads(10, wait_secs=0.05, tenant_bytes=lambda tenant: 2)
    with reads.room(5, "acme"):                 # past its share: its only read
        with pytest.raises(ReadsBusy) as refused:
            with reads.room(1, "acme"):
                pass
        with reads.room(5, "globex"):
            assert reads.held == 10
    assert reads.held == 0
    # The setting reached is the tenant's share, not the worker's room (5 of 10 held):
    # raising limits.worker_answer_bytes, as the answer said before, changes nothing.
    assert refused.value.error_object() == {"code": -32603, "message": TENANT_BUSY}
    assert "(limits.answer_bytes;" in caplog.text


def test_each_tenants_refusal_is_logged_whatever_another_tenants_were(caplog):
    """A line a minute per tenant and setting: acme refused at its share again and again
    left globex's refusal (the worker's room full) unlogged for the minute, and no line
    named the tenant."""
    reads = LargeReads(10, wait_secs=0.01,
                       tenant_bytes=lambda tenant: 4 if tenant == "acme" else 10)
    with reads.room(4, "acme"), reads.room(6, "globex"):        # acme's share, all the room
        for tenant, size in [("acme", 1), ("acme", 1), ("globex", 1)]:
            with pytest.raises(ReadsBusy):
                with reads.room(size, tenant):
                    pass
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert "of tenant acme" in lines[0] and "(limits.answer_bytes;" in lines[0]
    assert "of tenant globex" in lines[1] and "(limits.worker_answer_bytes;" in lines[1]
