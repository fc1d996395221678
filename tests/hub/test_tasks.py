"""ListTasks and CancelTask at the wire."""
from __future__ import annotations

import json
import threading

import pytest

from murmur_wsgi.hub import create_hub

from tests.hub.agents import gate
from tests.hub.conftest import (KEY_B, HubClient, close_hub, hub_config, not_cancelable,
                                send_params, sse_events, streaming, wait_until)

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too


def _ids(page):
    return [t["id"] for t in page["tasks"]]


def test_list_newest_first_paged_with_total(rpc):
    sent = [rpc.send(f"n{i}")["id"] for i in range(5)]
    page = rpc.result("ListTasks", {"pageSize": 2})
    assert _ids(page) == sent[::-1][:2]
    assert page["pageSize"] == 2 and page["totalSize"] == 5 and page["nextPageToken"]
    second = rpc.result("ListTasks", {"pageSize": 2, "pageToken": page["nextPageToken"]})
    assert _ids(second) == sent[::-1][2:4] and second["totalSize"] == 5
    third = rpc.result("ListTasks", {"pageSize": 2, "pageToken": second["nextPageToken"]})
    assert _ids(third) == sent[:1] and third["nextPageToken"] == ""
    everything = rpc.result("ListTasks", {})
    assert _ids(everything) == sent[::-1] and everything["pageSize"] == 50
    assert everything["nextPageToken"] == ""


def test_list_is_scoped_to_tenant_and_agent(hub, rpc):
    mine = rpc.send("mine")["id"]
    rpc.send("other agent", agent="tokens")
    HubClient(hub, "echo", {"X-API-Key": KEY_B}).send("other tenant")
    assert _ids(rpc.result("ListTasks", {})) == [mine]


@pytest.mark.parametrize("params", [{"pageSize": 0}, {"pageSize": 101}, {"pageSize": "5"},
                                    {"pageSize": True}, {"pageToken": "bogus"},
                                    {"pageToken": 5}, {"status": "DONE"}, {"contextId": 1},
                                    {"statusTimestampAfter": "yesterday"},
                                    {"includeArtifacts": "yes"}, {"historyLength": -1}])
def test_list_params_refused(rpc, params):
    assert rpc.error("ListTasks", params)["code"] == -32602


@pytest.mark.parametrize("token", [0, False, [], {}, 5, True, ["t1"], {"t": 1}])
def test_list_page_token_of_another_type_is_refused(rpc, token):
    rpc.send("x")
    error = rpc.error("ListTasks", {"pageToken": token})
    assert error["code"] == -32602
    assert error["message"] == "Invalid params: pageToken must be a string"


@pytest.mark.parametrize("token", ["", None])
def test_list_page_token_empty_or_null_is_the_first_page(rpc, token):
    sent = rpc.send("x")["id"]
    assert _ids(rpc.result("ListTasks", {"pageToken": token})) == [sent]


def test_list_page_size_bounds(rpc):
    rpc.send("x")
    for outside in (0, 101):
        assert rpc.error("ListTasks", {"pageSize": outside}) == {
            "code": -32602, "message": "Invalid params: pageSize must be from 1 to 100"}
    assert rpc.result("ListTasks", {"pageSize": 1})["pageSize"] == 1
    assert rpc.result("ListTasks", {"pageSize": 100})["pageSize"] == 100


def test_list_filters(rpc):
    a = rpc.send("a", context_id="ctx-a")
    b = rpc.send("b", context_id="ctx-b")
    failed = rpc.send("/fail no", context_id="ctx-a")
    assert _ids(rpc.result("ListTasks", {"contextId": "ctx-a"})) == [failed["id"], a["id"]]
    assert rpc.result("ListTasks", {"contextId": "ctx-a"})["totalSize"] == 2
    page = rpc.result("ListTasks", {"status": "TASK_STATE_FAILED"})
    assert _ids(page) == [failed["id"]] and page["totalSize"] == 1
    page = rpc.result("ListTasks", {"statusTimestampAfter": a["status"]["timestamp"]})
    assert a["id"] not in _ids(page)
    assert rpc.result("ListTasks", {"statusTimestampAfter": "2000-01-01T00:00:00Z"}
                      )["totalSize"] == 3
    paged = rpc.result("ListTasks", {"contextId": "ctx-a", "pageSize": 1})
    rest = rpc.result("ListTasks", {"contextId": "ctx-a", "pageSize": 1,
                                    "pageToken": paged["nextPageToken"]})
    assert _ids(paged) + _ids(rest) == [failed["id"], a["id"]]
    assert b["id"] not in _ids(paged) + _ids(rest)


def test_list_artifacts_and_history(rpc):
    rpc.send("x")
    plain = rpc.result("ListTasks", {})["tasks"][0]
    assert "artifacts" not in plain and len(plain["history"]) == 1
    full = rpc.result("ListTasks", {"includeArtifacts": True, "historyLength": 0})["tasks"][0]
    assert full["artifacts"][0]["artifactId"] == "answer" and "history" not in full


# --- CancelTask -------------------------------------------------------------------------


def test_cancel_a_running_task_keeps_what_it_produced(rpc):
    rpc.agent = "partial"
    task = streaming(rpc, "g-cancel")
    canceled = rpc.result("CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert canceled["artifacts"] == [{"artifactId": "answer", "name": "answer", "parts": [
        {"text": "partial answer", "mediaType": "text/plain"}]}]
    assert rpc.result("GetTask", {"id": task["id"]}) == canceled
    # Subscribers see the final CANCELED; a second cancel is -32002.
    events = sse_events(rpc.call("SubscribeToTask", {"id": task["id"]}))
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
    error = rpc.error("CancelTask", {"id": task["id"]})
    assert error["code"] == -32002
    assert error["data"][0]["metadata"] == {"taskId": task["id"],
                                            "state": "TASK_STATE_CANCELED"}


def test_cancel_a_finished_task(rpc):
    task = rpc.send("done")
    assert rpc.error("CancelTask", {"id": task["id"]})["code"] == -32002


def test_cancel_a_blocking_send_from_another_request(rpc):
    rpc.agent = "held"
    out = {}
    thread = threading.Thread(target=lambda: out.update(task=rpc.send("g-block")))
    thread.start()
    wait_until(lambda: rpc.hub.runs.in_flight())
    task_id = rpc.hub.runs.in_flight()[0].task_id
    other = HubClient(rpc.hub, "held")
    assert other.result("CancelTask", {"id": task_id})["status"]["state"] == \
        "TASK_STATE_CANCELED"
    thread.join(5)
    assert not thread.is_alive()
    assert out["task"]["status"]["state"] == "TASK_STATE_CANCELED"


def test_cancel_a_streaming_send_from_another_request(rpc):
    """The sender's own stream ends with the final CANCELED, what it streamed kept."""
    response = rpc.call("SendStreamingMessage", send_params("g-stream-cancel"), agent="partial",
                        buffered=False)
    chunks = iter(response.response)
    opening = next(chunks).decode()
    task_id = json.loads(opening.split("\n")[0][len("data: "):])["result"]["task"]["id"]
    wait_until(lambda: rpc.hub.runs.get(task_id) is not None and rpc.hub.runs.get(task_id).tokens)
    canceled = HubClient(rpc.hub, "partial").result("CancelTask", {"id": task_id})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    events = [json.loads(line[len("data: "):])["result"]
              for line in (opening + b"".join(chunks).decode()).split("\n")
              if line.startswith("data: ")]
    response.close()
    assert events[-1]["statusUpdate"]["status"] == canceled["status"]
    assert canceled["artifacts"] == [{"artifactId": "answer", "name": "answer", "parts": [
        {"text": "partial answer", "mediaType": "text/plain"}]}]


def test_cancel_a_run_that_does_not_stop(store):
    hub = create_hub(hub_config(store=store, cancel_timeout_secs=0.1))
    try:
        client = HubClient(hub, "stubborn")
        task = client.send("g-stubborn", configuration={"returnImmediately": True})
        assert gate("g-stubborn-in").wait(5)                   # its agent executes
        assert client.error("CancelTask", {"id": task["id"]}) == not_cancelable(
            task["id"], "TASK_STATE_WORKING", "it did not stop within 0.1 s")
        gate("g-stubborn").set()
        wait_until(lambda: not hub.runs.in_flight())
    finally:
        close_hub(hub)


def test_cancel_a_task_retention_forgets_as_it_ends_is_not_found():
    # NOTE: before, CancelTask read the task again once the run had stopped and used it
    # unchecked: forgotten meanwhile (here the tenant keeps 1 finished task, and another
    # ended), the answer was -32603 "Internal error" with a traceback in the log.
    hub = create_hub(hub_config(tasks={"max_per_tenant": 1}))
    try:
        client = HubClient(hub, "held")
        task = client.send("g-cancel-forgotten", configuration={"returnImmediately": True})
        wait_until(lambda: hub.runs.get(task["id"]) is not None)
        store, read = hub.store, hub.store.get
        reads = []

        def another_task_ends_first(tenant, agent, task_id):
            reads.append(task_id)
            if len(reads) == 2:                   # the read after the run stopped
                HubClient(hub).send("another task ends")
            return read(tenant, agent, task_id)

        store.get = another_task_ends_first
        error = client.error("CancelTask", {"id": task["id"]})
        del store.get
        assert (error["code"], error["message"]) == (-32001, "Task not found")
        assert client.error("GetTask", {"id": task["id"]})["code"] == -32001
    finally:
        gate("g-cancel-forgotten").set()
        hub.close(0)


def test_cancel_a_task_of_each_final_state_is_not_cancelable(hub, rpc):
    failed = rpc.send("x", agent="fails")
    rejected = HubClient(hub, "echo", {"X-API-Key": KEY_B}).send("beta")
    completed = rpc.send("done")
    assert [t["status"]["state"] for t in (failed, rejected, completed)] == [
        "TASK_STATE_FAILED", "TASK_STATE_REJECTED", "TASK_STATE_COMPLETED"]
    for task, client in ((failed, HubClient(hub, "fails")),
                         (rejected, HubClient(hub, "echo", {"X-API-Key": KEY_B})),
                         (completed, rpc)):
        assert client.error("CancelTask", {"id": task["id"]}) == \
            not_cancelable(task["id"], task["status"]["state"])
        assert client.result("GetTask", {"id": task["id"]}) == task


def test_another_tenants_or_agents_request_never_reaches_a_running_task(hub, rpc):
    """CancelTask and SubscribeToTask of a task that runs, from another tenant or from
    another agent of the same tenant: TaskNotFoundError, and the run goes on untouched."""
    rpc.agent = "held"
    task = rpc.send("g-isolated", configuration={"returnImmediately": True})
    not_found = {"code": -32001, "message": "Task not found", "data": [{
        "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND",
        "domain": "a2a-protocol.org", "metadata": {"taskId": task["id"]}}]}
    for client in (HubClient(hub, "held", {"X-API-Key": KEY_B}), HubClient(hub, "echo")):
        for method in ("CancelTask", "SubscribeToTask", "GetTask"):
            assert client.error(method, {"id": task["id"], "tenant": "acme"}) == not_found
    assert rpc.result("GetTask", {"id": task["id"]})["status"]["state"] == "TASK_STATE_WORKING"
    assert not rpc.hub.store.cancel_marked(task["id"], tenant="acme")
    gate("g-isolated").set()
    wait_until(lambda: rpc.result("GetTask", {"id": task["id"]})["status"]["state"]
               == "TASK_STATE_COMPLETED")
