"""Python agents: create_app(agent=callable), "pkg.mod:callable", and the TaskContext API."""
from __future__ import annotations

import base64
import logging
import threading

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.agents import AgentLoadError
from murmur_wsgi.agents.base import TaskCanceled, TaskContext, TaskFailed
from tests.agents_util import frames_of, response_of, status_text, tmp_home
from tests.conftest import Rpc
from tests.tasks_util import DEADLINE, NOW, send_params, wait_state

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 8
MANIFEST = {"name": "py-agent", "version": "0.1.0",
            "capabilities": {"shell": {"allow": ["sleep"]}}}


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


def serve(agent, **manifest):
    return Rpc(create_app(dict(MANIFEST, **manifest), agent=agent))


@pytest.fixture
def doors():
    opened = []

    def open_door(agent, **manifest):
        rpc = serve(agent, **manifest)
        opened.append(rpc.door)
        return rpc

    yield open_door
    for door in opened:
        door.close()


def run(rpc, text="hello", **extra):
    return rpc.result("SendMessage", send_params(text, **extra))["task"]


def echo_agent(ctx: TaskContext) -> str:
    """Named by the manifest test as ``tests.shared.test_python_agent:echo_agent``."""
    return f"echo: {ctx.text}"


# --- serving a callable -------------------------------------------------------------

def test_create_app_serves_a_callable_without_yaml(doors):
    seen = {}

    def agent(ctx):
        seen.update(task_id=ctx.task_id, context_id=ctx.context_id, trust=ctx.trust,
                    images=ctx.images, data=ctx.data, text=ctx.text)
        return "four"

    rpc = doors(agent)
    parts = [{"text": "two plus two"}, {"data": {"n": 2}},
             {"raw": base64.b64encode(PNG).decode(), "mediaType": "image/png"}]
    message = {"messageId": "m", "role": "ROLE_USER", "parts": parts, "contextId": "ctx-py"}
    task = rpc.result("SendMessage", {"message": message})["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert response_of(task) == "four"
    assert seen["task_id"] == task["id"] and seen["context_id"] == "ctx-py"
    assert seen["trust"] == "untrusted"
    assert seen["images"] == [("image/png", PNG)]
    assert seen["data"] == [{"n": 2}]
    assert "two plus two" in seen["text"] and '"n": 2' in seen["text"]


def test_a_manifest_names_a_callable_as_module_colon_name(doors):
    rpc = Rpc(create_app(dict(MANIFEST, agent="tests.shared.test_python_agent:echo_agent")))
    try:
        assert response_of(run(rpc, "hi")).startswith("echo: <untrusted-content")
    finally:
        rpc.door.close()


def test_the_example_python_agent_from_a_manifest(doors):
    rpc = Rpc(create_app(dict(MANIFEST, agent="examples.python_agent:agent")))
    try:
        task = run(rpc, "one two three")
        assert response_of(task) == "3 words"
        names = [f["frame"] for f in frames_of(rpc.door, task["id"])]
        assert names == ["thinking", "tool-call-started", "tool-call-progress", "artifact",
                         "text"]
    finally:
        rpc.door.close()


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_x:agent", "agent: cannot import no_such_module_x"),
    ("tests.shared.test_python_agent:missing", "agent: tests.shared.test_python_agent has no missing"),
    ("tests.shared.test_python_agent:MANIFEST", "agent: tests.shared.test_python_agent:MANIFEST is not "
                                         "callable"),
])
def test_an_agent_that_cannot_be_loaded_is_refused_at_start(spec, message):
    with pytest.raises(AgentLoadError) as info:
        create_app(dict(MANIFEST, agent=spec))
    assert str(info.value).startswith(message)


def test_none_returned_completes_without_a_response(doors):
    # NOTE: None writes no response artifact.
    task = run(doors(lambda ctx: None))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert status_text(task) == "task completed"
    assert "artifacts" not in task


# --- failing -------------------------------------------------------------------------

def test_task_failed_ends_the_task_with_its_message(doors):
    def agent(ctx):
        raise TaskFailed("the model is out of tokens")

    task = run(doors(agent))
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == "the model is out of tokens"


def test_an_escaping_exception_fails_the_task_and_stays_server_side(doors, caplog):
    def agent(ctx):
        secret = "s3cret-value"
        raise RuntimeError(f"boom with {secret}")

    with caplog.at_level(logging.ERROR, logger="murmur_wsgi.door.tasks.manager"):
        response = doors(agent).call("SendMessage", send_params("x"))
    task = response.get_json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == "the agent failed: RuntimeError"
    body = response.get_data(as_text=True)
    assert "s3cret-value" not in body and "Traceback" not in body
    (logged,) = [r for r in caplog.records if r.exc_info]
    assert logged.exc_info[0] is RuntimeError
    assert "s3cret-value" in caplog.text and "Traceback" in caplog.text


# --- ask ---------------------------------------------------------------------------

def test_ask_pauses_input_required_and_returns_the_reply(doors):
    rpc = doors(lambda ctx: "you said " + ctx.ask("Which colour?").text)
    task = run(rpc)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["artifacts"] == [{"artifactId": "prompt", "name": "prompt",
                                  "parts": [{"text": "Which colour?",
                                             "mediaType": "text/plain"}]}]
    done = run(rpc, "blue", taskId=task["id"])
    # A plain A2A client is untrusted: its reply comes fenced, as its first message did.
    assert response_of(done) == ("you said <untrusted-content source=task:event>\nblue\n"
                                 "</untrusted-content>")


def test_input_timeout_fails_the_task(doors):
    rpc = doors(lambda ctx: ctx.ask("Anyone?").text, lifecycle={"input_timeout_secs": 0.1})
    task = run(rpc)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    record = wait_state(rpc.door, task["id"], "TASK_STATE_FAILED")
    assert record.status_text == "input-timeout"
    assert rpc.result("GetTask", {"id": task["id"]})["status"]["message"]["parts"][0][
        "text"] == "input-timeout"


# --- frames, background, cancel --------------------------------------------------------

def test_every_frame_a_python_agent_writes(doors):
    def agent(ctx):
        ctx.thinking("hmm")
        call = ctx.tool_call_started("grep", {"pattern": "x"}, tool_call_id="call_7")
        ctx.tool_call_progress(call, "searching")
        ctx.artifact("grep", "x.txt:1", tool_call_id=call, exit_code=0, duration_ms=3)
        ctx.write("partial")
        ctx.write("done", final=True)
        return "ok"

    rpc = doors(agent)
    task = run(rpc)
    assert frames_of(rpc.door, task["id"]) == [
        {"frame": "thinking", "text": "hmm", "final": False},
        {"frame": "tool-call-started", "toolCallId": "call_7", "toolName": "grep",
         "input": {"pattern": "x"}},
        {"frame": "tool-call-progress", "toolCallId": "call_7", "text": "searching"},
        {"frame": "artifact", "toolName": "grep", "content": "x.txt:1", "fenceSource": None,
         "toolCallId": "call_7", "isError": None, "durationMs": 3, "exitCode": 0,
         "truncated": None},
        {"frame": "text", "text": "partial", "final": False},
        {"frame": "text", "text": "done", "final": True}]


def test_background_starts_only_allowed_binaries(doors):
    rpc = doors(lambda ctx: ctx.background(ctx.data[0]))
    started = rpc.result("SendMessage", {"message": {
        "messageId": "m", "role": "ROLE_USER", "parts": [{"data": "sleep 5"}]}})["task"]
    assert response_of(started).startswith("wrk_")
    refused = rpc.result("SendMessage", {"message": {
        "messageId": "m", "role": "ROLE_USER", "parts": [{"data": "rm -rf /tmp/x"}]}})["task"]
    assert refused["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(refused) == ("background command refused: rm is not in "
                                    "capabilities.shell.allow")


def test_cancel_is_seen_promptly_by_wait_and_by_the_frame_calls(doors):
    returned = threading.Event()
    outcome = {}

    def agent(ctx):
        try:
            outcome["waited_out"] = ctx.wait(60)        # True at once on cancel
            outcome["cancelled"] = ctx.cancelled
            try:
                ctx.write("too late")
            except TaskCanceled:
                outcome["write_raised"] = True
            return "ignored"
        finally:
            returned.set()

    rpc = doors(agent)
    task = _canceled_while_working(rpc, returned)
    assert outcome == {"waited_out": True, "cancelled": True, "write_raised": True}
    assert rpc.result("GetTask", {"id": task["id"]})["status"]["state"] == \
        "TASK_STATE_CANCELED"


@pytest.mark.parametrize("seconds", [float("inf"), 1e300])
def test_a_wait_without_end_lasts_until_the_cancel(doors, seconds):
    returned = threading.Event()
    outcome = {}

    def agent(ctx):
        try:
            outcome["waited_out"] = ctx.wait(seconds)
            return "ignored"
        finally:
            returned.set()

    rpc = doors(agent)
    _canceled_while_working(rpc, returned)
    assert outcome == {"waited_out": True}


def test_a_wait_of_nan_seconds_is_refused(doors):
    def agent(ctx):
        try:
            ctx.wait(float("nan"))
        except ValueError as ex:
            return f"refused: {ex}"
        return "waited"

    rpc = doors(agent)
    task = run(rpc, configuration=NOW)
    wait_state(rpc.door, task["id"], "TASK_STATE_COMPLETED", "TASK_STATE_FAILED")
    task = rpc.result("GetTask", {"id": task["id"]})
    assert response_of(task) == "refused: wait: seconds is not a number (NaN)"


def test_under_single_the_slot_is_free_only_once_the_canceled_agent_returned(doors):
    started, release = threading.Event(), threading.Event()

    def agent(ctx):
        if "stubborn" in ctx.text:
            started.set()
            release.wait(DEADLINE)                      # deaf to the cancel for a while
            return "late"
        return "next"

    rpc = doors(agent)                                  # task_acceptance: single
    manager = rpc.door.session.manager
    task = run(rpc, "stubborn", configuration=NOW)
    assert started.wait(DEADLINE)
    assert rpc.result("CancelTask", {"id": task["id"]})["status"]["state"] == \
        "TASK_STATE_CANCELED"
    busy = run(rpc, "meanwhile")
    assert busy["status"]["state"] == "TASK_STATE_REJECTED"
    assert status_text(busy) == "task rejected: capsule is busy"
    assert manager.agent_running(task["id"])
    release.set()
    assert manager.wait_agent_returned(task["id"], DEADLINE)
    accepted = run(rpc, "now")
    assert accepted["status"]["state"] == "TASK_STATE_COMPLETED"
    assert response_of(accepted) == "next"
    assert rpc.result("GetTask", {"id": task["id"]})["status"]["state"] == \
        "TASK_STATE_CANCELED"                            # its late answer is dropped


def test_under_queue_the_next_task_starts_once_the_canceled_agent_returned(doors):
    started, release = threading.Event(), threading.Event()
    overlapped = []

    def agent(ctx):
        if "stubborn" in ctx.text:
            started.set()
            release.wait(DEADLINE)
            return "late"
        overlapped.append(not release.is_set())         # started beside the stubborn one?
        return "next"

    rpc = doors(agent, lifecycle={"task_acceptance": "queue", "queue_depth": 1})
    manager = rpc.door.session.manager
    task = run(rpc, "stubborn", configuration=NOW)
    assert started.wait(DEADLINE)
    queued = run(rpc, "queued", configuration=NOW)
    rpc.result("CancelTask", {"id": task["id"]})
    assert rpc.result("GetTask", {"id": queued["id"]})["status"]["state"] == \
        "TASK_STATE_SUBMITTED"
    release.set()
    assert manager.wait_agent_returned(task["id"], DEADLINE)
    wait_state(rpc.door, queued["id"], "TASK_STATE_COMPLETED")
    assert overlapped == [False]


def _canceled_while_working(rpc, returned) -> dict:
    """Run a task of ``rpc``'s agent, cancel it once WORKING, wait for the agent to return
    (``returned``): the task."""
    task = run(rpc, configuration=NOW)
    wait_state(rpc.door, task["id"], "TASK_STATE_WORKING")
    assert rpc.result("CancelTask", {"id": task["id"]})["status"]["state"] == \
        "TASK_STATE_CANCELED"
    assert returned.wait(DEADLINE)
    return task
