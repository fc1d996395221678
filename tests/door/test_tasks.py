"""SendMessage held and immediate, continuing a task, acceptance, CancelTask, GetTask."""
from __future__ import annotations

import json
import threading

import pytest

from tests.conftest import Rpc, make_door
from tests.tasks_util import DEADLINE, NOW, send_params, strip_volatile, wait_state, wait_until

RESPONSE = {"artifactId": "response", "name": "response"}


def completed(text):
    return {"id": "tsk", "contextId": "ctx",
            "status": {"state": "TASK_STATE_COMPLETED",
                       "message": {"messageId": "msg", "contextId": "ctx", "taskId": "tsk",
                                   "role": "ROLE_AGENT",
                                   "parts": [{"text": "task completed",
                                              "mediaType": "text/plain"}]},
                       "timestamp": "ts"},
            "artifacts": [dict(RESPONSE, parts=[{"text": text, "mediaType": "text/plain"}])]}


@pytest.fixture
def live_rpc():
    door = make_door(capabilities={"shell": {"allow": ["sleep"]}})
    yield Rpc(door)
    door.close()


def test_held_send_message_answers_the_completed_task(rpc):
    response = rpc.call("SendMessage", send_params("four"))
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert "A2A-Extensions" not in response.headers
    task = response.get_json()["result"]["task"]
    assert strip_volatile(task) == completed("four")
    assert task["status"]["message"]["messageId"] == f"msg_{task['id']}_status"
    # Key order is the spec's: id, contextId, status, artifacts.
    raw = json.loads(response.get_data(), object_pairs_hook=lambda kv: [k for k, _ in kv])
    assert raw == ["jsonrpc", "id", "result"]


def test_get_task_answers_what_send_message_answered(rpc):
    task = rpc.result("SendMessage", send_params("four"))["task"]
    assert rpc.result("GetTask", {"id": task["id"], "historyLength": 3}) == task


def test_return_immediately_answers_submitted(live_rpc):
    task = live_rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
    assert strip_volatile(task) == {"id": "tsk", "contextId": "ctx",
                                    "status": {"state": "TASK_STATE_SUBMITTED",
                                               "timestamp": "ts"}}
    live_rpc.result("CancelTask", {"id": task["id"]})


def test_context_id_is_kept(rpc):
    task = rpc.result("SendMessage", send_params("x", contextId="ctx-mine"))["task"]
    assert task["contextId"] == "ctx-mine"


@pytest.mark.parametrize("value", ["yes", 1, 0, [], {}])
def test_return_immediately_must_be_a_boolean(rpc, value):
    error = rpc.error("SendMessage", send_params("x", {"returnImmediately": value}))
    assert error == {"code": -32602, "message": "configuration.returnImmediately must be a boolean"}
    assert len(rpc.door.session.store) == 0


@pytest.mark.parametrize("value", [None, False])
def test_return_immediately_null_or_false_holds(rpc, value):
    task = rpc.result("SendMessage", send_params("x", {"returnImmediately": value}))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"


def test_fail_directive_fails_with_its_message(rpc):
    task = rpc.result("SendMessage", send_params("/fail the driver failed"))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert task["status"]["message"]["parts"] == [{"text": "the driver failed",
                                                   "mediaType": "text/plain"}]
    assert "artifacts" not in task


def test_agent_exception_fails_the_task_without_a_traceback(caplog):
    def broken(ctx):
        return 1 / 0

    rpc = Rpc(make_door() if False else __import__("murmur_wsgi").create_app(
        {"name": "a", "version": "1"}, agent=broken))
    response = rpc.call("SendMessage", send_params("x"))
    task = response.get_json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert task["status"]["message"]["parts"][0]["text"] == "the agent failed: ZeroDivisionError"
    assert b"Traceback" not in response.get_data()
    assert any("ZeroDivisionError" in (r.exc_text or "") for r in caplog.records)


def test_ask_pauses_then_a_reply_completes(rpc):
    task = rpc.result("SendMessage", send_params("/ask Which branch?"))["task"]
    assert strip_volatile(task) == {
        "id": "tsk", "contextId": "ctx",
        "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "ts"},
        "artifacts": [{"artifactId": "prompt", "name": "prompt",
                       "parts": [{"text": "Which branch?", "mediaType": "text/plain"}]}]}
    reply = rpc.result("SendMessage", send_params("main", taskId=task["id"],
                                                  contextId=task["contextId"]))["task"]
    assert reply["id"] == task["id"]
    assert reply["status"]["state"] == "TASK_STATE_COMPLETED"
    assert reply["artifacts"][0]["parts"][0]["text"] == "main"


def test_reply_with_return_immediately_answers_working(rpc):
    task = rpc.result("SendMessage", send_params("/ask Which branch?"))["task"]
    reply = rpc.result("SendMessage", send_params("main", NOW, taskId=task["id"]))["task"]
    assert reply["status"]["state"] == "TASK_STATE_WORKING"
    assert "artifacts" not in reply
    wait_state(rpc.door, task["id"], "TASK_STATE_COMPLETED")


def test_continuing_an_unknown_task_is_not_found(rpc):
    error = rpc.error("SendMessage", send_params("x", taskId="tsk_nope"))
    assert error["code"] == -32001
    assert error["data"][0]["metadata"] == {"taskId": "tsk_nope"}


def test_continuing_an_ended_task_names_its_state(rpc):
    task = rpc.result("SendMessage", send_params("done"))["task"]
    error = rpc.error("SendMessage", send_params("again", taskId=task["id"]))
    assert error["code"] == -32004
    assert error["data"][0]["reason"] == "UNSUPPORTED_OPERATION"
    assert error["data"][0]["metadata"] == {"taskId": task["id"],
                                            "state": "TASK_STATE_COMPLETED"}


def test_continuing_a_working_task_is_refused(live_rpc):
    task = live_rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
    wait_state(live_rpc.door, task["id"], "TASK_STATE_WORKING")
    error = live_rpc.error("SendMessage", send_params("more", taskId=task["id"]))
    assert error["code"] == -32004
    assert error["data"][0]["metadata"] == {"taskId": task["id"],
                                            "state": "TASK_STATE_WORKING"}


def test_reply_in_another_context_is_invalid_params(rpc):
    task = rpc.result("SendMessage", send_params("/ask Which?"))["task"]
    error = rpc.error("SendMessage", send_params("main", taskId=task["id"],
                                                 contextId="ctx-other"))
    assert error["code"] == -32602
    assert "data" not in error
    assert rpc.result("GetTask", {"id": task["id"]})["status"]["state"] == \
        "TASK_STATE_INPUT_REQUIRED"


def test_single_rejects_a_second_task_as_busy(live_rpc):
    first = live_rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
    second = live_rpc.result("SendMessage", send_params("hello"))["task"]
    assert strip_volatile(second) == {
        "id": "tsk", "contextId": "ctx",
        "status": {"state": "TASK_STATE_REJECTED",
                   "message": {"messageId": "msg", "contextId": "ctx", "taskId": "tsk",
                               "role": "ROLE_AGENT",
                               "parts": [{"text": "task rejected: capsule is busy",
                                          "mediaType": "text/plain"}]},
                   "timestamp": "ts"}}
    live_rpc.result("CancelTask", {"id": first["id"]})
    # NOTE: the canceled task ended at once; the slot is free once its agent has returned
    # (two agents never run at once): until then a message is still refused as busy.
    assert live_rpc.door.session.manager.wait_agent_returned(first["id"], DEADLINE)
    assert live_rpc.result("SendMessage", send_params("hi"))["task"]["status"]["state"] == \
        "TASK_STATE_COMPLETED"


def test_single_counts_a_paused_task_as_live(rpc):
    rpc.result("SendMessage", send_params("/ask Which?"))
    second = rpc.result("SendMessage", send_params("hello"))["task"]
    assert second["status"]["state"] == "TASK_STATE_REJECTED"


def test_queue_runs_in_order_and_bounds_waiting_tasks(queue_rpc):
    first = queue_rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
    second = queue_rpc.result("SendMessage", send_params("second", NOW))["task"]
    third = queue_rpc.result("SendMessage", send_params("third", NOW))["task"]
    assert second["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert third["status"]["state"] == "TASK_STATE_REJECTED"
    assert third["status"]["message"]["parts"][0]["text"] == "task rejected: capsule is busy"
    assert queue_rpc.result("GetTask", {"id": second["id"]})["status"]["state"] == \
        "TASK_STATE_SUBMITTED"
    queue_rpc.result("CancelTask", {"id": first["id"]})
    done = wait_state(queue_rpc.door, second["id"], "TASK_STATE_COMPLETED")
    assert done.response == "second"


def test_canceling_a_queued_task_never_runs_it(queue_rpc):
    first = queue_rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
    second = queue_rpc.result("SendMessage", send_params("second", NOW))["task"]
    assert queue_rpc.result("CancelTask", {"id": second["id"]})["status"]["state"] == \
        "TASK_STATE_CANCELED"
    queue_rpc.result("CancelTask", {"id": first["id"]})
    assert queue_rpc.door.session.store.get(second["id"]).response is None


def test_none_refuses_send_message():
    rpc = Rpc(make_door(lifecycle={"task_acceptance": "none"}))
    assert rpc.error("SendMessage", send_params("x")) == {"code": -32601,
                                                          "message": "Method not found"}


def test_cancel_a_live_task_then_again(live_rpc):
    task = live_rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
    canceled = live_rpc.result("CancelTask", {"id": task["id"]})
    assert strip_volatile(canceled) == {"id": "tsk", "contextId": "ctx",
                                        "status": {"state": "TASK_STATE_CANCELED",
                                                   "timestamp": "ts"}}
    error = live_rpc.error("CancelTask", {"id": task["id"]})
    assert error == {"code": -32002,
                     "message": "Task cannot be canceled: it is already TASK_STATE_CANCELED",
                     "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                               "reason": "TASK_NOT_CANCELABLE", "domain": "a2a-protocol.org",
                               "metadata": {"taskId": task["id"],
                                            "state": "TASK_STATE_CANCELED"}}]}
    assert live_rpc.result("GetTask", {"id": task["id"]}) == canceled


def test_cancel_a_completed_task_is_not_cancelable(rpc):
    task = rpc.result("SendMessage", send_params("x"))["task"]
    error = rpc.error("CancelTask", {"id": task["id"]})
    assert error["message"] == "Task cannot be canceled: it is already TASK_STATE_COMPLETED"
    assert rpc.result("GetTask", {"id": task["id"]}) == task


def test_background_command_shows_in_running_commands_and_residue(live_rpc):
    bg = live_rpc.result("SendMessage", send_params("/background sleep 30"))["task"]
    assert bg["status"]["state"] == "TASK_STATE_COMPLETED"
    running = bg["metadata"]["murmur"]["runningCommands"]
    assert len(running) == 1
    assert running[0]["workId"].startswith("wrk_")
    assert running[0]["binary"].endswith("/sleep")
    assert running[0]["command"] == "sleep 30"
    assert isinstance(running[0]["runningMs"], int)
    task = live_rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
    canceled = live_rpc.result("CancelTask", {"id": task["id"]})
    residue = canceled["artifacts"]
    assert residue[0]["artifactId"] == "residue"
    item = residue[0]["parts"][0]
    assert item["mediaType"] == "application/json"
    assert list(item["data"]) == ["kind", "work_id", "binary", "command", "started_at_ms"]
    assert item["data"]["kind"] == "detached_shell"
    assert item["data"]["binary"] == "sleep"
    stopped = live_rpc.result("murmur.StopSession", {})
    assert stopped["canceled"] == []
    assert stopped["residue"] == [item["data"]]


def test_background_refuses_a_binary_not_allowed(rpc):
    task = rpc.result("SendMessage", send_params("/background sleep 30"))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "not in capabilities.shell.allow" in task["status"]["message"]["parts"][0]["text"]


@pytest.mark.parametrize("method", ["GetTask", "CancelTask"])
@pytest.mark.parametrize("params", [{}, {"id": ""}, {"id": 7}])
def test_task_methods_require_an_id(rpc, method, params):
    assert rpc.error(method, params) == {"code": -32602, "message": f"{method} requires an id"}


def test_close_answers_held_requests_and_rejects_new_tasks():
    door = make_door()
    rpc = Rpc(door)
    answers = []
    thread = threading.Thread(target=lambda: answers.append(
        Rpc(door).result("SendMessage", send_params("/sleep 30"))))
    thread.start()
    wait_until(door, lambda: any(r.state == "TASK_STATE_WORKING"
                                 for r in door.session.store.snapshot()))
    door.close()
    thread.join(10)
    assert not thread.is_alive()
    assert answers[0]["task"]["status"]["state"] in ("TASK_STATE_WORKING",
                                                     "TASK_STATE_CANCELED")
    task = rpc.result("SendMessage", send_params("x"))["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert task["status"]["message"]["parts"][0]["text"] == \
        "task rejected: the session is closing"


def test_referenced_tasks_reach_the_agent(rpc):
    done = rpc.result("SendMessage", send_params("four"))["task"]
    failed = rpc.result("SendMessage", send_params("/fail the driver failed"))["task"]
    raw = rpc.result("SendMessage", send_params(
        "/raw", referenceTaskIds=[done["id"], failed["id"], done["id"], "tsk_nope"]))["task"]
    text = raw["artifacts"][0]["parts"][0]["text"]
    assert text.startswith("<untrusted-content source=task:event>\n/raw\n\nReferenced tasks:\n")
    assert (f"- {done['id']}: completed\n```response\nfour\n```\n"
            f"- {failed['id']}: failed: the driver failed\n"
            "- tsk_nope: not a task this capsule holds\n</untrusted-content>") in text


def test_finished_tasks_are_evicted_oldest_first():
    rpc = Rpc(make_door(tasks={"keep_finished": 3}))
    ids = [rpc.result("SendMessage", send_params(f"t{i}"))["task"]["id"] for i in range(5)]
    assert rpc.error("GetTask", {"id": ids[0]})["code"] == -32001
    assert rpc.error("GetTask", {"id": ids[1]})["code"] == -32001
    for task_id in ids[2:]:
        assert rpc.result("GetTask", {"id": task_id})["id"] == task_id
    assert len(rpc.door.session.store) == 3


def _owners_door(tasks, *names):
    auth = {"scheme": "bearer",
            "credentials": {name: {"scopes": ["SendMessage", "GetTask"]} for name in names}}
    rpc = Rpc(make_door(tasks=tasks, network={"authentication": auth}))
    bearer = {name: {"Authorization": f"Bearer {rpc.door.tokens.tokens[name]}"}
              for name in names}
    return rpc, bearer


def _held(rpc, headers, task_id):
    response = rpc.call("GetTask", {"id": task_id}, headers).get_json()
    return "result" in response


def _kept(rpc, task_id):
    """Whether the store still holds the task, without a read (a read caches its wire form)."""
    return rpc.door.session.store.get(task_id) is not None


def test_a_credential_flooding_tiny_tasks_evicts_only_its_own():
    rpc, bearer = _owners_door({"keep_finished": 3}, "alpha", "beta")
    try:
        kept = rpc.result("SendMessage", send_params("mine"), bearer["beta"])["task"]["id"]
        flood = [rpc.result("SendMessage", send_params(f"t{i}"), bearer["alpha"])["task"]["id"]
                 for i in range(10)]
        assert _held(rpc, bearer["beta"], kept)
        held = [_held(rpc, bearer["alpha"], task_id) for task_id in flood]
        assert held == [False] * 7 + [True] * 3            # its own oldest went
        assert len(rpc.door.session.store) == 4
    finally:
        rpc.door.close()


def test_the_finished_ceiling_evicts_from_the_owner_holding_most():
    rpc, bearer = _owners_door({"keep_finished": 4, "keep_finished_total": 5}, "alpha", "beta")
    try:
        first = rpc.result("SendMessage", send_params("b0"), bearer["beta"])["task"]["id"]
        many = [rpc.result("SendMessage", send_params(f"a{i}"), bearer["alpha"])["task"]["id"]
                for i in range(4)]
        second = rpc.result("SendMessage", send_params("b1"), bearer["beta"])["task"]["id"]
        # Six finished, a ceiling of five: alpha holds the most, so alpha loses its oldest.
        assert _held(rpc, bearer["beta"], first) and _held(rpc, bearer["beta"], second)
        assert [_held(rpc, bearer["alpha"], task_id) for task_id in many] == [False] + [True] * 3
        assert rpc.door.session.store.evicted == 1
    finally:
        rpc.door.close()


def test_finished_tasks_are_bounded_by_their_size():
    # Before tasks.keep_finished_bytes, only the count bounded them: 200 echoed messages
    # of 1 MB held 201 MB, 400 held 401 MB (10,000 a caller: 10 GB); 400 now hold 269 MB.
    rpc = Rpc(make_door(tasks={"keep_finished_bytes": 10_000}))
    try:
        ids = [rpc.result("SendMessage", send_params("x" * 3000))["task"]["id"]
               for _ in range(6)]
        # Each holds its 3,000-character answer and its ids: three fit in 10,000 bytes.
        assert [_kept(rpc, task_id) for task_id in ids] == [False] * 3 + [True] * 3
        large = rpc.result("SendMessage", send_params("y" * 20_000))["task"]
        # One larger than the bound alone stays until the next one finishes.
        assert rpc.result("GetTask", {"id": large["id"]})["artifacts"] == large["artifacts"]
        assert [_kept(rpc, task_id) for task_id in ids] == [False] * 6
        small = rpc.result("SendMessage", send_params("z"))["task"]["id"]
        assert not _kept(rpc, large["id"]) and _kept(rpc, small)
    finally:
        rpc.door.close()


def test_the_bytes_ceiling_evicts_from_the_owner_holding_most():
    rpc, bearer = _owners_door({"keep_finished_bytes": 100_000,
                                "keep_finished_bytes_total": 10_000}, "alpha", "beta")
    try:
        kept = rpc.result("SendMessage", send_params("b" * 1000), bearer["beta"])["task"]["id"]
        flood = [rpc.result("SendMessage", send_params("a" * 3000), bearer["alpha"])["task"]["id"]
                 for _ in range(5)]
        # 1,000 + 5 x 3,000 characters past a ceiling of 10,000: alpha holds the most, and pays.
        assert _kept(rpc, kept)
        assert [_kept(rpc, task_id) for task_id in flood] == [False] * 3 + [True] * 2
        assert rpc.door.session.store.evicted == 3
    finally:
        rpc.door.close()


@pytest.mark.parametrize("read, kept", [
    pytest.param(None, 2, id="unread"),
    pytest.param("GetTask", 1, id="GetTask"),
    pytest.param("ListTasks", 1, id="ListTasks"),
])
def test_finished_tasks_are_counted_by_what_they_hold(read, kept):
    # Before, a finished task counted its texts' characters alone: an answer of 100,000
    # emoji holds 400 KB as a text, and 1.2 MB more in the wire form a read caches (12
    # characters each, escaped), but counted 100 KB: 66 MB of such answers, read, were held
    # under a 4 MiB keep_finished_bytes. Now each counts its memory and its cached forms.
    rpc = Rpc(make_door(tasks={"keep_finished_bytes": 1_000_000}))
    try:
        ids = []
        for _ in range(6):
            ids.append(rpc.result("SendMessage", send_params("\U0001F600" * 100_000))["task"]["id"])
            if read == "GetTask":
                rpc.result("GetTask", {"id": ids[-1]})
            elif read == "ListTasks":
                rpc.result("ListTasks", {"pageSize": 1, "includeArtifacts": True})
        assert [_kept(rpc, task_id) for task_id in ids] == [False] * (6 - kept) + [True] * kept
        store = rpc.door.session.store
        assert store._bytes_total == sum(store.get(task_id).size() for task_id in ids[-kept:])
    finally:
        rpc.door.close()


def test_background_refuses_a_path_that_ends_in_an_allowed_name(live_rpc, tmp_path):
    fake = tmp_path / "sleep"
    fake.write_text("#!/bin/sh\ntouch \"$0.ran\"\n")
    fake.chmod(0o755)
    task = live_rpc.result("SendMessage", send_params(f"/background {fake} 1"))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "not in capabilities.shell.allow" in task["status"]["message"]["parts"][0]["text"]
    assert not (tmp_path / "sleep.ran").exists()


def test_a_reply_reaches_the_agent_fenced_as_its_sender_is_untrusted():
    seen = []

    def agent(ctx):
        seen.append(ctx.ask("which?").text)
        return "ok"

    rpc = Rpc(__import__("murmur_wsgi").create_app({"name": "a", "version": "1"}, agent=agent))
    task = rpc.result("SendMessage", send_params("go"))["task"]
    rpc.result("SendMessage", send_params("main", taskId=task["id"]))
    assert seen == ["<untrusted-content source=task:event>\nmain\n</untrusted-content>"]


def test_an_agent_stopped_by_a_base_exception_still_ends_its_task():
    def stopped(ctx):
        raise SystemExit(3)

    rpc = Rpc(__import__("murmur_wsgi").create_app({"name": "a", "version": "1"}, agent=stopped))
    task = rpc.result("SendMessage", send_params("x"))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert task["status"]["message"]["parts"][0]["text"] == "the agent was stopped"
    # The capsule is not left busy.
    assert rpc.result("SendMessage", send_params("y"))["task"]["status"]["state"] == \
        "TASK_STATE_FAILED"


def test_an_agent_writes_only_frames_the_card_lists():
    def agent(ctx):
        ctx.frame("quota", "quota", {"left": 1})        # process transport only
        return "unreachable"

    rpc = Rpc(__import__("murmur_wsgi").create_app({"name": "a", "version": "1"}, agent=agent))
    task = rpc.result("SendMessage", send_params("x"))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert task["status"]["message"]["parts"][0]["text"] == "the agent failed: ValueError"


def test_close_rejects_tasks_that_never_started(queue_rpc):
    first = queue_rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
    second = queue_rpc.result("SendMessage", send_params("second", NOW))["task"]
    wait_state(queue_rpc.door, first["id"], "TASK_STATE_WORKING")
    queue_rpc.door.close()
    queued = queue_rpc.result("GetTask", {"id": second["id"]})
    assert queued["status"]["state"] == "TASK_STATE_REJECTED"
    assert queued["status"]["message"]["parts"][0]["text"] == \
        "task rejected: the session ended before this task started"
    assert queue_rpc.result("GetTask", {"id": first["id"]})["status"]["state"] in (
        "TASK_STATE_WORKING", "TASK_STATE_CANCELED")


def test_a_status_event_carries_the_tasks_own_timestamp(rpc):
    reader = rpc.door.session.ring.reader()
    task = rpc.result("SendMessage", send_params("/ask Which?"))["task"]
    events = [json.loads(e.payload) for e in reader.next(0)[0]]
    paused = [e["statusUpdate"]["status"] for e in events if "statusUpdate" in e]
    assert paused[-1]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert paused[-1]["timestamp"] == task["status"]["timestamp"]
    reader.close()
