"""What GetTask, ListTasks and CancelTask answer, compared with the reference's tables.

"Task metadata" (runningCommands: oldest first, a command cut at 200 characters, the same
on every read), ListTasks' tasks being exactly GetTask's, -32002 for each way a task ends,
the held request murmur.StopSession answers, and the "Referenced tasks" line of a task in
each state, as the agent receives it.
"""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi import create_app
from tests.conftest import Rpc, make_door
from tests.tasks_util import DEADLINE, NOW, send_params, wait_state, wait_until

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
LONG = "sleep 30 " + "0 " * 120                     # 249 characters


@pytest.fixture
def background():
    """A door whose agent leaves two commands running, then ends as its text says."""
    def agent(ctx):
        ctx.background("sleep 31")
        ctx.background(LONG)
        if ctx.text.endswith("fail\n</untrusted-content>"):
            raise RuntimeError("failed on purpose")
        return "ok"

    door = create_app({"name": "a", "version": "1",
                       "capabilities": {"shell": {"allow": ["sleep"]}}}, agent=agent)
    yield Rpc(door)
    door.close()


def test_running_commands_are_oldest_first_cut_at_200_and_fixed(background):
    task = background.result("SendMessage", send_params("go"))["task"]
    first, second = task["metadata"]["murmur"]["runningCommands"]
    assert list(first) == ["workId", "binary", "command", "runningMs"]
    assert first["command"] == "sleep 31"
    assert second["command"] == LONG[:200] + "\u2026"
    assert first["binary"] == second["binary"] and first["binary"].endswith("/sleep")
    assert all(isinstance(c["runningMs"], int) and c["runningMs"] >= 0
               for c in (first, second))
    # Counted to the task's end: every later read says the same.
    assert background.result("GetTask", {"id": task["id"]}) == task
    residue = background.result("murmur.StopSession", {})["residue"]
    assert [item["command"] for item in residue] == ["sleep 31", LONG]     # whole there


def test_list_tasks_lists_each_task_exactly_as_get_task_answers_it(background):
    done = background.result("SendMessage", send_params("go"))["task"]
    failed = background.result("SendMessage", send_params("fail"))["task"]
    assert failed["status"]["state"] == "TASK_STATE_FAILED" and "artifacts" not in failed
    bare = background.result("ListTasks", {})["tasks"]
    full = background.result("ListTasks", {"includeArtifacts": True})["tasks"]
    got = [background.result("GetTask", {"id": t["id"]}) for t in (failed, done)]
    assert full[1] == got[1]
    assert list(full[0]) == ["id", "contextId", "status", "artifacts", "metadata"]
    assert full[0] == dict(got[0], artifacts=[], metadata=got[0]["metadata"])
    assert bare == [{k: v for k, v in t.items() if k != "artifacts"} for t in got]
    assert "metadata" in bare[0] and "metadata" in bare[1]


@pytest.mark.parametrize("ending", ["failed", "rejected"])
def test_cancel_task_on_each_ended_state_is_not_cancelable(ending):
    door = make_door(lifecycle={"task_acceptance": "queue", "queue_depth": 1},
                     capabilities={"shell": {"allow": ["sleep"]}})
    rpc = Rpc(door)
    if ending == "failed":
        task = rpc.result("SendMessage", send_params("/fail no"))["task"]
    else:
        running = rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
        task = rpc.result("SendMessage", send_params("queued", NOW))["task"]
        wait_state(door, running["id"], "TASK_STATE_WORKING")
        door.close()                     # the queued task ends rejected, never started
        task = rpc.result("GetTask", {"id": task["id"]})
    state = task["status"]["state"]
    assert state == f"TASK_STATE_{ending.upper()}"
    assert rpc.error("CancelTask", {"id": task["id"]}) == {
        "code": -32002, "message": f"Task cannot be canceled: it is already {state}",
        "data": [{"@type": ERROR_INFO, "reason": "TASK_NOT_CANCELABLE",
                  "domain": "a2a-protocol.org",
                  "metadata": {"taskId": task["id"], "state": state}}]}
    assert rpc.result("GetTask", {"id": task["id"]}) == task        # left unchanged
    door.close()


def test_stop_session_answers_a_held_request_with_the_task_as_it_stands():
    door = make_door()
    answers = []
    holder = threading.Thread(target=lambda: answers.append(
        Rpc(door).result("SendMessage", send_params("/sleep 30"))))
    holder.start()
    try:
        wait_until(door, lambda: any(r.state == "TASK_STATE_WORKING"
                                     for r in door.session.store.snapshot()))
        stopped = Rpc(door).result("murmur.StopSession", {})
        holder.join(DEADLINE)
        assert not holder.is_alive()
        [task_id] = stopped["canceled"]
        assert answers == [{"task": Rpc(door).result("GetTask", {"id": task_id})}]
        assert answers[0]["task"]["status"]["state"] == "TASK_STATE_CANCELED"
        assert stopped == {"canceled": [task_id], "residue": [], "session_id": door.session.id}
    finally:
        door.close()


def test_each_referenced_tasks_line_names_its_state_in_murmurs_words():
    door = make_door(lifecycle={"task_acceptance": "queue", "queue_depth": 2},
                     capabilities={"shell": {"allow": ["sleep"]}})
    rpc = Rpc(door)
    try:
        paused = rpc.result("SendMessage", send_params("/ask Which?"))["task"]
        canceled = rpc.result("SendMessage", send_params("dropped", NOW))["task"]
        rpc.result("CancelTask", {"id": canceled["id"]})
        rpc.result("SendMessage", send_params(paused["id"], taskId=paused["id"]))
        working = rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
        wait_state(door, working["id"], "TASK_STATE_WORKING")
        queued = rpc.result("SendMessage", send_params("later", NOW))["task"]
        ids = [working["id"], queued["id"], canceled["id"], paused["id"]]
        raw = rpc.result("SendMessage", send_params("/raw", NOW, referenceTaskIds=ids))["task"]
        rpc.result("CancelTask", {"id": working["id"]})
        text = wait_state(door, raw["id"], "TASK_STATE_COMPLETED").response
        assert text.endswith(
            "Referenced tasks:\n"
            f"- {working['id']}: working\n"
            f"- {queued['id']}: submitted\n"
            f"- {canceled['id']}: canceled\n"
            f"- {paused['id']}: completed\n```response\n{paused['id']}\n```\n"
            "</untrusted-content>")
    finally:
        door.close()
