"""CancelTask meeting a run's end: a run that ends as the cancel reads its task answers
its own end's state, never the state the cancel read before it ended; a run the cancel
stops as Redis stalls answers its end once Redis has it (CANCELED), never -32603 for a run
the cancel cut unless the stall outlasts the cancel's timeout."""
from __future__ import annotations

import contextlib
import time

import pytest

from murmur_wsgi.errors import StoreError
from murmur_wsgi.hub import create_hub

from tests.hub.agents import gate
from tests.hub.conftest import (FAST, HubClient, agent, close_hub, hub_config, not_cancelable,
                                redis_hub, wait_until)
from tests.redis_util import RedisServer


def test_a_run_that_ends_as_its_cancel_reads_the_task_answers_its_end(redis_server):
    """The cancel reads the task WORKING, then the run completes (its end written, the run
    ended and still registered): -32002 naming COMPLETED. Before, the cancel saw the run
    ended and refused with the state it had read: `it is already TASK_STATE_WORKING`, a
    state that can be canceled."""
    hub = redis_hub(redis_server, {"ends": "tests.hub.agents:ends_when_told"})
    client = HubClient(hub, "ends")
    read = hub.store.get

    def read_then_end(tenant, agent_name, task_id):
        found = read(tenant, agent_name, task_id)
        gate("g-ends").set()                            # the run ends after this read
        assert gate("g-ends-ending").wait(5)
        return found

    try:
        task = client.send("g-ends", configuration={"returnImmediately": True})
        assert gate("g-ends-in").wait(5)                # its stop waker is set
        hub.store.get = read_then_end
        try:
            error = client.error("CancelTask", {"id": task["id"]})
        finally:
            del hub.store.get
        assert error == not_cancelable(task["id"], "TASK_STATE_COMPLETED")
        gate("g-ends-go").set()
        wait_until(lambda: hub.runs.get(task["id"]) is None)
        assert client.result("GetTask", {"id": task["id"]})["status"]["state"] == \
            "TASK_STATE_COMPLETED"
    finally:
        close_hub(hub)


def _stalling(tmp_path, **config):
    """A redis-server of the test's own (it is paused) and a hub on it hosting
    ``stalls_its_store`` as "stalls"."""
    server = RedisServer(tmp_path).start()
    return server, redis_hub(server, {"stalls": "tests.hub.agents:stalls_its_store"}, **config)


def _errs_then_ends_canceled(client, task_id: str, held: str | None = None) -> None:
    """CancelTask answers the store's error (-32603); the task then ends CANCELED, and a
    CancelTask again is -32002 naming it. ``held``: the name of an append ``_append_held``
    holds: the answer comes while it is held, within 1.2 s, and lets it through."""
    began = time.monotonic()
    error = client.error("CancelTask", {"id": task_id})
    took = time.monotonic() - began
    if held is not None:
        gate(held + "-through").set()
        assert gate(held + "-writing").is_set()
        assert took < 1.2, took
    assert (error["code"], error["message"]) == (-32603, StoreError.message)
    wait_until(lambda: "result" in client.call("GetTask", {"id": task_id}).get_json()
               and client.result("GetTask", {"id": task_id})["status"]["state"]
               == "TASK_STATE_CANCELED")
    assert client.error("CancelTask", {"id": task_id}) == \
        not_cancelable(task_id, "TASK_STATE_CANCELED")


def test_a_cancel_as_the_store_stalls_answers_the_canceled_task_once_written(tmp_path):
    """Redis stalls (1.5 s) as CancelTask cuts the run here: the run's end is
    refused, the run ends CANCELED, and its end is written once Redis answers; the cancel
    waits for it and answers the task CANCELED. Before, it answered -32603 "try again" (the
    mark refused) for a run it had stopped, whose task then ended CANCELED."""
    server, hub = _stalling(tmp_path)
    client = HubClient(hub, "stalls")
    try:
        task = client.send(f"g-stall {server.url} 1500",
                           configuration={"returnImmediately": True})
        assert gate("g-stall-in").wait(5)
        payload = client.call("CancelTask", {"id": task["id"]}).get_json()
        assert "result" in payload, payload
        assert payload["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        assert client.result("GetTask", {"id": task["id"]}) == payload["result"]
    finally:
        close_hub(hub)
        server.stop()


def test_a_cancel_whose_store_stalls_past_its_timeout_answers_the_stores_error(tmp_path):
    """Redis stalls (3 s) past the cancel's timeout (1 s): the run here is stopped, its end
    not written yet: -32603, the store's error (as the sender's answer), never the task as
    Redis still holds it, WORKING. Once written, the task is CANCELED, and a CancelTask
    again is -32002 naming it."""
    server, hub = _stalling(tmp_path, cancel_timeout_secs=1)
    client = HubClient(hub, "stalls")
    try:
        task = client.send(f"g-long-stall {server.url} 3000",
                           configuration={"returnImmediately": True})
        assert gate("g-long-stall-in").wait(5)
        _errs_then_ends_canceled(client, task["id"])
    finally:
        close_hub(hub)
        server.stop()


@pytest.mark.timed
@pytest.mark.waits
def test_a_cancel_whose_runs_end_stalls_keeps_its_timeout(tmp_path):
    """Redis stalls (3 s, each command cut at ``redis.timeout_secs``: 2 s) as CancelTask
    cuts the run: its end is being written when the cancel's timeout (0.5 s) passes, and
    the answer is the store's error then, -32603, not 2 s later. Before, the cancel wrote
    the mark for another replica's run (2 s) and waited for the run's lock, held through
    its end's round trip: 2 s and more."""
    server, hub = _stalling(tmp_path, cancel_timeout_secs=0.5, redis=dict(timeout_secs=2))
    client = HubClient(hub, "stalls")
    try:
        task = client.send(f"g-end-stall {server.url} 3000",
                           configuration={"returnImmediately": True})
        assert gate("g-end-stall-in").wait(5)
        began = time.monotonic()
        error = client.error("CancelTask", {"id": task["id"]})
        took = time.monotonic() - began
        assert (error["code"], error["message"]) == (-32603, StoreError.message)
        assert took < 1.2, took
    finally:
        close_hub(hub)
        server.stop()


def test_a_cancel_of_a_run_whose_end_is_unwritten_answers_the_stores_error(redis_server):
    """The run completed here and left, its end refused (Redis answering its reads and the
    cancel's mark, not the end): a CancelTask past its timeout (0.5 s) answers -32603, the
    store's error, as for a run still registered; once the end is written, -32002 naming
    COMPLETED. Before, it marked the task, waited for a final event that was not written,
    and answered -32002 "it did not stop within 0.5 s" for a run that had ended."""
    hub = redis_hub(redis_server, cancel_timeout_secs=0.5)
    client = HubClient(hub, "held")

    def refused(*args, **kwargs):
        raise StoreError()

    try:
        task = client.send("g-unwritten", configuration={"returnImmediately": True})
        hub.store.end = refused
        try:
            gate("g-unwritten").set()
            wait_until(lambda: hub.runs.get(task["id"]) is None)
            assert hub.runs.unwritten_end(task["id"])
            error = client.error("CancelTask", {"id": task["id"]})
        finally:
            del hub.store.end
        assert (error["code"], error["message"]) == (-32603, StoreError.message)
        wait_until(lambda: not hub.runs.unwritten_end(task["id"]))
        assert client.error("CancelTask", {"id": task["id"]}) == \
            not_cancelable(task["id"], "TASK_STATE_COMPLETED")
    finally:
        close_hub(hub)


def test_a_cancel_from_another_replica_that_loses_the_store_after_its_mark_answers_its_error(
        tmp_path):
    """Replica B marks a run of replica A's; A hears the mark and its run's stop stalls
    Redis (3 s): B cannot read the task's log, and answers -32603, the store's error, not a
    -32002 naming a state it could not read. The mark was delivered: A's run ends CANCELED
    all the same, and a CancelTask again (once Redis answers) is -32002 naming it."""
    server = RedisServer(tmp_path).start()
    config = hub_config(store=server.url, redis=dict(FAST, liveness_secs=5.0))
    config["tenants"]["acme"]["agents"]["stalls"] = agent("tests.hub.agents:stalls_its_store")
    owner, other = create_hub(config), create_hub(config)
    try:
        task = HubClient(owner, "stalls").send(f"g-far-stall {server.url} 3000",
                                               configuration={"returnImmediately": True})
        assert gate("g-far-stall-in").wait(5)
        _errs_then_ends_canceled(HubClient(other, "stalls"), task["id"])
    finally:
        close_hub(other)
        close_hub(owner)
        server.stop()


@pytest.mark.timed
@pytest.mark.waits
def test_a_cancel_whose_mark_waits_on_the_store_answers_within_its_timeout(tmp_path):
    """Replica B reads a task whose run, on replica A, does not stop; Redis then refuses
    writes for 1.5 s (``CLIENT PAUSE … WRITE``, within its 3 s timeout), so B's cancel mark
    waits: B answers -32002 once its 2 s have passed from its read. Before, B then waited
    for the run's end the whole 2 s again: 3.5 s."""
    server = RedisServer(tmp_path).start()
    config = hub_config(store=server.url, redis=dict(FAST, liveness_secs=5.0, timeout_secs=3.0))
    owner, other = create_hub(config), create_hub(config)
    other.config.cancel_timeout_secs = 2.0
    pauser = server.client()
    read, asked = other.store.get, []

    def read_then_pause(tenant, agent_name, task_id):
        found = read(tenant, agent_name, task_id)
        if not asked:
            asked.append(time.monotonic())
            pauser.client_pause(1500, all=False)
        return found

    try:
        task = HubClient(owner, "stubborn").send("g-mark-waits",
                                                 configuration={"returnImmediately": True})
        assert gate("g-mark-waits-in").wait(5)              # its agent executes, on the owner
        other.store.get = read_then_pause
        try:
            error = HubClient(other, "stubborn").error("CancelTask", {"id": task["id"]})
        finally:
            del other.store.get
        took = time.monotonic() - asked[0]
        assert error == not_cancelable(task["id"], "TASK_STATE_WORKING",
                                       "it did not stop within 2 s")
        assert 1.5 <= took < 3.0, took
    finally:
        gate("g-mark-waits").set()
        pauser.close()
        close_hub(other)
        close_hub(owner)
        server.stop()


@pytest.mark.timed
@pytest.mark.waits
def test_a_cancel_of_a_run_writing_through_a_stall_answers_within_its_timeout(redis_server):
    """The run's agent writes an event, and the store's round trip stalls (until the test
    lets it through): the write holds the run's lock meanwhile. CancelTask (its timeout
    0.5 s) answers the store's error, -32603, within its timeout; once the write is
    through the run is stopped, the task ends CANCELED, and a CancelTask again is -32002
    naming it. Before, the cancel's stop waited for the lock as long as the write took."""
    hub = redis_hub(redis_server, {"reports": "tests.hub.agents:gated_reports"},
                    cancel_timeout_secs=0.5)
    client = HubClient(hub, "reports")
    try:
        with _append_held(hub, "p000000", "g-write-stall"):   # the agent's event
            task = client.send("g-write-stall 1", configuration={"returnImmediately": True})
            gate("g-write-stall").set()
            assert gate("g-write-stall-writing").wait(5)
            _errs_then_ends_canceled(client, task["id"], held="g-write-stall")
    finally:
        close_hub(hub)


@contextlib.contextmanager
def _append_held(hub, marker: str, name: str):
    """The store's append of an event holding ``marker`` held, the run's lock with it
    (``<name>-writing`` set), until ``<name>-through`` opens (5 s at most)."""
    append = hub.store.append

    def held(task_id, payload, n):
        if marker in payload:
            gate(name + "-writing").set()
            gate(name + "-through").wait(5)
        return append(task_id, payload, n)

    hub.store.append = held
    try:
        yield
    finally:
        gate(name + "-through").set()
        del hub.store.append


@pytest.mark.timed
@pytest.mark.waits
def test_a_cancel_whose_stopped_run_flushes_through_a_stall_answers_within_its_timeout(
        redis_server):
    """The run stops at once, but its end first writes the text it held unstored, and that
    round trip stalls (until the test lets it through), the run's lock held. CancelTask
    (its timeout 0.5 s) answers within its timeout: -32002, the run not ended in time (its
    end not begun); once the write is through the task ends CANCELED, and a CancelTask
    again is -32002 naming it. Before, the cancel's wait for the run's end waited for the
    lock as long as the write took (5 s here)."""
    hub = redis_hub(redis_server, {"writes": "tests.hub.agents:writes_then_holds"},
                    cancel_timeout_secs=0.5, events={"merge_secs": 60})
    client = HubClient(hub, "writes")
    try:
        with _append_held(hub, "HELD-BACK", "g-flush-stall"):    # the end's flush
            task = client.send("g-flush-stall first held-back",
                               configuration={"returnImmediately": True})
            assert gate("g-flush-stall-in").wait(5)
            began = time.monotonic()
            error = client.error("CancelTask", {"id": task["id"]})
            took = time.monotonic() - began
            gate("g-flush-stall-through").set()
            assert gate("g-flush-stall-writing").is_set()
            assert error == not_cancelable(task["id"], "TASK_STATE_WORKING",
                                           "it did not stop within 0.5 s")
            assert took < 1.2, took
            wait_until(lambda: client.result("GetTask", {"id": task["id"]})["status"][
                "state"] == "TASK_STATE_CANCELED")
            assert client.error("CancelTask", {"id": task["id"]}) == \
                not_cancelable(task["id"], "TASK_STATE_CANCELED")
    finally:
        close_hub(hub)
