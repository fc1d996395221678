"""The demo agent (``agent: demo``): the echo and every directive of docs/demo-agent.md."""
from __future__ import annotations


import pytest

from tests.agents_util import frames_of, response_of, status_text, statuses_of, tmp_home
from tests.conftest import Rpc, make_door
from tests.tasks_util import DEADLINE, NOW, send_params, wait_state

WORKING = "TASK_STATE_WORKING"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


@pytest.fixture
def rpc():
    door = make_door(capabilities={"shell": {"allow": ["sleep"]}})
    yield Rpc(door)
    door.close()


def run(rpc, text, **extra):
    return rpc.result("SendMessage", send_params(text, **extra))["task"]


def test_plain_text_is_echoed_without_the_untrusted_fence(rpc):
    task = run(rpc, "just words\nover two lines")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert response_of(task) == "just words\nover two lines"


def test_a_directive_counts_only_on_the_first_line(rpc):
    assert response_of(run(rpc, "first\n/fail not here")) == "first\n/fail not here"


def test_an_unknown_directive_is_echoed(rpc):
    assert response_of(run(rpc, "/nope 1")) == "/nope 1"


def test_sleep_completes_with_the_remaining_lines(rpc):
    task = run(rpc, "/sleep 0.3\nline two\nline three")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert response_of(task) == "line two\nline three"


def test_sleep_writes_a_progress_status_each_second(rpc):
    task = run(rpc, "/sleep 1.05\nawake")
    assert response_of(task) == "awake"
    progress = [text for state, text in statuses_of(rpc.door, task["id"])
                if state == WORKING and text]
    assert progress == ["slept 1s of 1.05s"]


def test_sleep_is_cancellable_at_any_moment(rpc):
    task = run(rpc, "/sleep 30", configuration=NOW)
    wait_state(rpc.door, task["id"], WORKING)
    manager = rpc.door.session.manager
    assert manager.agent_running(task["id"])
    assert rpc.result("CancelTask", {"id": task["id"]})["status"]["state"] == "TASK_STATE_CANCELED"
    assert manager.wait_agent_returned(task["id"], DEADLINE)   # it saw the cancel and returned


@pytest.mark.parametrize("arg", ["abc", "-1", "nan"])
def test_sleep_refuses_what_is_not_seconds(rpc, arg):
    task = run(rpc, f"/sleep {arg}")
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == f"/sleep takes a number of seconds, not '{arg}'"


@pytest.mark.parametrize("text, question", [("/ask Which colour?", "Which colour?"),
                                            ("/ask", "What should I answer?")])
def test_ask_pauses_for_a_reply_that_completes_it(rpc, text, question):
    task = run(rpc, text)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    (prompt,) = task["artifacts"]
    assert prompt == {"artifactId": "prompt", "name": "prompt",
                      "parts": [{"text": question, "mediaType": "text/plain"}]}
    done = run(rpc, "blue", taskId=task["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert response_of(done) == "blue"


@pytest.mark.parametrize("text, message", [("/fail it broke", "it broke"),
                                           ("/fail", "the demo agent was asked to fail")])
def test_fail_ends_the_task_failed_with_the_message(rpc, text, message):
    task = run(rpc, text)
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == message
    assert "artifacts" not in task


def test_stream_writes_n_text_frames(rpc):
    task = run(rpc, "/stream 3")
    assert response_of(task) == "chunk 1\nchunk 2\nchunk 3"
    assert frames_of(rpc.door, task["id"]) == [
        {"frame": "text", "text": "chunk 1", "final": False},
        {"frame": "text", "text": "chunk 2", "final": False},
        {"frame": "text", "text": "chunk 3", "final": True}]


def test_stream_refuses_what_is_not_a_count(rpc):
    task = run(rpc, "/stream many")
    assert status_text(task) == "/stream takes a number of chunks, not 'many'"


def test_think_writes_a_thinking_frame(rpc):
    task = run(rpc, "/think quietly")
    assert response_of(task) == "quietly"
    assert frames_of(rpc.door, task["id"]) == [
        {"frame": "thinking", "text": "quietly", "final": False}]


def test_tool_writes_the_frames_of_a_tool_call(rpc):
    task = run(rpc, "/tool grep\n-r needle")
    assert response_of(task) == "grep done"
    assert frames_of(rpc.door, task["id"]) == [
        {"frame": "tool-call-started", "toolCallId": "call_1", "toolName": "grep",
         "input": {"args": "-r needle"}},
        {"frame": "tool-call-progress", "toolCallId": "call_1", "text": "grep is running"}]


def test_raw_answers_the_text_as_the_agent_received_it(rpc):
    task = run(rpc, "/raw")
    assert response_of(task) == ("<untrusted-content source=task:event>\n/raw\n"
                                 "</untrusted-content>")


def test_background_starts_an_allowed_command(rpc):
    task = run(rpc, "/background sleep 5")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    text = response_of(task)
    assert text.startswith("started wrk_") and text.endswith(": sleep 5")
    (running,) = task["metadata"]["murmur"]["runningCommands"]
    assert running["workId"] == text.split()[1].rstrip(":")
    assert running["command"] == "sleep 5"


def test_background_refuses_a_binary_not_allowed(rpc):
    task = run(rpc, "/background bash -c true")
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == ("background command refused: bash is not in "
                                 "capabilities.shell.allow")
