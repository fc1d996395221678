"""The process harness: real harness processes (the examples and tests/harness_faults.py).

Every failure test shows the task's final status and that its process is gone.
"""
from __future__ import annotations

import json
import os
import re
import signal
import threading
from pathlib import Path

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.agents import harness
from murmur_wsgi.agents.harness import HarnessAgent
from tests.agents_util import (FAULTS, IDLE, UPPER_PY, UPPER_SH, assert_gone, frames_of,
                               harness_pid, harness_rpc, process_manifest, records_of,
                               response_of, status_text, tmp_home)
from tests.conftest import Rpc
from tests.process_util import exits_within
from tests.tasks_util import DEADLINE, NOW, send_params, wait_state, wait_until

COMPLETED = "TASK_STATE_COMPLETED"
FAILED = "TASK_STATE_FAILED"
CANCELED = "TASK_STATE_CANCELED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


@pytest.fixture
def doors():
    opened = []

    def open_door(argv, lifecycle=None, **agent):
        rpc = harness_rpc(argv, lifecycle, **agent)
        opened.append(rpc.door)
        return rpc

    yield open_door
    for door in opened:
        door.close()
        assert door.session.agent.live_pids() == []


def frame_seen(door, task_id, name, text=None):
    return lambda: any(f["frame"] == name and (text is None or f.get("text") == text)
                       for f in frames_of(door, task_id))


# --- the examples ---------------------------------------------------------------------

@pytest.mark.parametrize("argv", [UPPER_PY, UPPER_SH], ids=["python", "sh"])
def test_example_harness_upper_cases_the_text(doors, argv):
    rpc = doors(argv)
    task = rpc.result("SendMessage", send_params("hello, harness"))["task"]
    assert task["status"]["state"] == COMPLETED
    assert response_of(task) == "HELLO, HARNESS"
    assert assert_gone(rpc.door, harness_pid(rpc.door, task["id"])) == 0


def test_python_example_writes_every_frame_kind(doors):
    rpc = doors(UPPER_PY)
    task = rpc.result("SendMessage", send_params("abc"))["task"]
    frames = frames_of(rpc.door, task["id"])
    assert [f["frame"] for f in frames] == ["thinking", "tool-call-started",
                                            "tool-call-progress", "text", "quota",
                                            "suggested-prompt"]
    assert frames[1] == {"frame": "tool-call-started", "toolCallId": "call_upper",
                         "toolName": "upper", "input": {"chars": 3}}
    assert frames[3] == {"frame": "text", "text": "ABC", "final": True}
    assert frames[4] == {"frame": "quota", "used": 3, "limit": 100000}
    assert frames[5] == {"frame": "suggested-prompt", "text": "Now shout something else"}


def test_card_lists_quota_and_suggested_prompt_under_process(doors):
    rpc = doors(UPPER_PY)
    card = rpc.client.get("/.well-known/agent-card.json").get_json()
    (stream,) = [e for e in card["capabilities"]["extensions"]
                 if "streaming-protocol" in e["uri"]]
    assert "quota" in stream["params"]["frames"]
    assert "suggested-prompt" in stream["params"]["frames"]


def test_ask_pauses_input_required_and_the_reply_completes(doors):
    rpc = doors(UPPER_PY)
    task = rpc.result("SendMessage", send_params("?"))["task"]
    assert task["status"]["state"] == INPUT_REQUIRED
    (prompt,) = [a for a in task["artifacts"] if a["artifactId"] == "prompt"]
    assert prompt["parts"][0]["text"] == "What should I upper-case?"
    reply = send_params("quiet please", taskId=task["id"], contextId=task["contextId"])
    done = rpc.result("SendMessage", reply)["task"]
    assert done["status"]["state"] == COMPLETED
    assert response_of(done) == "QUIET PLEASE"
    assert assert_gone(rpc.door, harness_pid(rpc.door, task["id"])) == 0


def documented_task_lines() -> list[dict]:
    """Each task line docs/harness.md shows, its elisions (``[…]``, ``{…}``) left empty."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "harness.md").read_text("utf-8")
    return [json.loads(shown.replace("[…]", "[]").replace("{…}", "{}"))
            for shown in re.findall(r'(\{"type":"task".*\})', text)]


def test_the_task_line_is_what_the_door_documents(doors):
    rpc = doors(FAULTS + ["echo-task"])
    task = rpc.result("SendMessage", send_params("hi", contextId="ctx-a"))["task"]
    line = json.loads(response_of(task))
    # NOTE: message and caller come after the first five keys.
    assert list(line) == ["type", "task_id", "context_id", "text", "session", "message",
                          "caller"]
    assert [list(shown) for shown in documented_task_lines()] == [list(line)] * 3
    assert line["type"] == "task" and line["task_id"] == task["id"]
    assert line["context_id"] == "ctx-a"
    assert line["session"] == {"mode": "new", "id": None}
    assert "hi" in line["text"]


# --- every way a harness can fail ---------------------------------------------------

FAILURES = [
    pytest.param("malformed", "harness: line 1 is not JSON", id="malformed"),
    pytest.param("not-object", "harness: line 1 is not a JSON object with a string type",
                 id="not-an-object"),
    pytest.param("nan", "harness: line 1 is not JSON", id="nan"),
    # before: "the agent's answer is not valid JSON" (the bytes read as a lone surrogate)
    pytest.param("surrogate-bytes", "harness: line 1 is not JSON", id="surrogate-bytes"),
    pytest.param("bad-field", "harness: line 1 (text): text must be a string", id="bad-field"),
    pytest.param("unknown", 'harness: line 1 has an unknown type "telepathy"', id="unknown"),
    pytest.param("exit3", "harness: exited with status 3 without a response", id="early-exit"),
    pytest.param("crash", "harness: was killed by SIGSEGV without a response", id="crash"),
    pytest.param("hang", "harness: no output for 0.5s (idle_timeout_secs)", id="hang"),
    pytest.param("oversized", "harness: line 1 is longer than max_line_bytes (1024 bytes)",
                 id="oversized"),
    pytest.param("stderr-flood", "harness: wrote more than 1048576 bytes to stderr",
                 id="stderr-flood"),
    pytest.param("long-session", "harness: line 1 (session): id is longer than "
                 "max_session_id_bytes (64 bytes)", id="long-session-id"),
    pytest.param("fail", "the model said no", id="fail-line"),
    pytest.param("close-stdout", "harness: closed its stdout without a response",
                 id="closed-stdout"),
]

IDLE_MODES = ("hang", "close-stdout")      # modes that fail only once the idle limit passes


@pytest.mark.parametrize("mode, message", FAILURES)
def test_a_failing_harness_fails_the_task_and_leaves_no_process(doors, mode, message):
    rpc = doors(FAULTS + [mode], idle_timeout_secs=IDLE if mode in IDLE_MODES else 5)
    task = rpc.result("SendMessage", send_params("go"))["task"]
    assert task["status"]["state"] == FAILED
    assert status_text(task) == message
    assert rpc.result("GetTask", {"id": task["id"]})["status"]["state"] == FAILED
    assert_gone(rpc.door, harness_pid(rpc.door, task["id"]))
    (end,) = [r for r in records_of(rpc.door, "task_end") if r["task_id"] == task["id"]]
    assert end["exit_status"] == "failed"


def test_a_response_read_before_a_stderr_flood_completes_the_task(doors, monkeypatch):
    # NOTE: before, the flood was checked before the lines already read: a harness that
    # answered, then logged past max_stderr_bytes on its way out, failed its task whenever
    # the door took the flood first (6 of 10 tasks with a slow line before the response).
    rpc = doors(FAULTS + ["respond-then-flood-stderr"])
    task_id, pid = _started(rpc, "respond-then-flood-stderr")
    proc = rpc.door.session.agent._live[pid]
    took_go, go_on = threading.Event(), threading.Event()
    thinking = harness._HANDLERS["thinking"]

    def held(agent, ctx, proc, msg, line):
        if msg.get("text") == "go":
            took_go.set()
            assert go_on.wait(DEADLINE)        # the agent thread, mid-line, takes its time
        return thinking(agent, ctx, proc, msg, line)

    monkeypatch.setitem(harness._HANDLERS, "thinking", held)
    os.kill(pid, signal.SIGUSR1)              # the "go" line, then the response
    assert took_go.wait(DEADLINE)
    with proc.events.not_empty:               # the response is read...
        assert proc.events.not_empty.wait_for(lambda: proc.events.queue, DEADLINE)
    os.kill(pid, signal.SIGUSR1)              # ...then 2 MiB on stderr
    assert proc.flooded.wait(DEADLINE)
    go_on.set()
    record = wait_state(rpc.door, task_id, COMPLETED, FAILED)
    assert (record.state, record.status_text) == (COMPLETED, "task completed")
    assert response_of(rpc.result("GetTask", {"id": task_id})) == "done"
    assert_gone(rpc.door, pid)


def test_blank_lines_are_lines_for_the_idle_limit(doors):
    """A harness that writes blank lines (a keepalive) for four times ``idle_timeout_secs``,
    then answers: its task completes. Before, blank lines were skipped before the idle
    deadline was renewed: the task failed "no output for 0.5s", though the docs count
    any line on stdout and ignore blank ones."""
    rpc = doors(FAULTS + ["blank-keepalive"], idle_timeout_secs=IDLE)
    task = rpc.result("SendMessage", send_params("go"))["task"]
    assert task["status"]["state"] == COMPLETED, status_text(task)
    assert response_of(task) == "alive"


def test_the_largest_max_line_bytes_reads_lines(doors):
    # NOTE: before, 2^63 - 1 (the largest size a setting takes) overflowed the read of
    # stdout: its thread died with a logged OverflowError, and every task failed
    # "no output for 600s (idle_timeout_secs)" once the idle limit passed.
    rpc = doors(FAULTS + ["echo-task"], max_line_bytes=2 ** 63 - 1)
    task = rpc.result("SendMessage", send_params("go"))["task"]
    assert task["status"]["state"] == COMPLETED


@pytest.mark.parametrize("levels", [64, 65, 5000])
def test_a_line_nested_past_max_line_depth_fails_the_task(doors, caplog, levels):
    # NOTE: before, 5,000 levels (10 KB) ended the parse in RecursionError: the task failed
    # "the agent failed: RecursionError" and its traceback was logged.
    rpc = doors(FAULTS + [f"nested-{levels}"], max_line_bytes=64 * 1024)
    task = rpc.result("SendMessage", send_params("go"))["task"]
    if levels == 64:
        assert task["status"]["state"] == COMPLETED
        return
    assert task["status"]["state"] == FAILED
    assert status_text(task) == "harness: line 1 nests deeper than max_line_depth (64 levels)"
    assert_gone(rpc.door, harness_pid(rpc.door, task["id"]))
    assert "Traceback" not in caplog.text


def test_a_harness_that_cannot_start_fails_the_task(doors, tmp_path):
    rpc = doors([str(tmp_path / "no-such-harness")])
    task = rpc.result("SendMessage", send_params("go"))["task"]
    assert task["status"]["state"] == FAILED
    assert status_text(task) == (f"harness: cannot start {tmp_path / 'no-such-harness'}: "
                                 "No such file or directory")
    assert records_of(rpc.door, "harness_start") == []


def test_the_group_dies_with_the_harness(doors):
    rpc = doors(FAULTS + ["grandchild"], idle_timeout_secs=IDLE)
    task = rpc.result("SendMessage", send_params("go", configuration=NOW))["task"]
    door = rpc.door
    wait_until(door, lambda: any(f["frame"] == "thinking" for f in frames_of(door, task["id"])))
    (note,) = [f["text"] for f in frames_of(door, task["id"])]
    child = int(note.split()[1])
    pid = harness_pid(door, task["id"])
    assert os.getpgid(child) == pid                       # the harness's own process group
    record = wait_state(door, task["id"], FAILED)
    assert record.status_text == "harness: no output for 0.5s (idle_timeout_secs)"
    assert_gone(door, pid)
    # The child is killed too: it exits (a zombie until init reaps it, or gone).
    assert exits_within(child, DEADLINE)


def test_a_harness_that_exits_leaving_a_child_on_its_stdout_fails_at_its_exit(doors):
    # NOTE: before, its stdout stayed open (the child holds it), so its exit was not seen:
    # the task failed only at the idle deadline (600 s by default), "no output for 5s".
    rpc = doors(FAULTS + ["exit-leaving-child"], idle_timeout_secs=5)
    task = rpc.result("SendMessage", send_params("go"))["task"]
    assert task["status"]["state"] == FAILED
    assert status_text(task) == "harness: exited with status 3 without a response"
    assert assert_gone(rpc.door, harness_pid(rpc.door, task["id"])) == 3
    assert exits_within(_child_of(rpc.door, task["id"]), DEADLINE)   # its group died with it


def test_a_harness_that_exits_leaving_a_child_outside_its_group_fails_at_its_exit(doors):
    # NOTE: before, a child that left the group (setsid) held its stdout open past the
    # group's end: the exit was never seen, and the task failed only at the idle
    # deadline (600 s by default), "no output for 5s".
    rpc = doors(FAULTS + ["exit-leaving-setsid-child"], idle_timeout_secs=5)
    task = rpc.result("SendMessage", send_params("go"))["task"]
    try:
        assert status_text(task) == "harness: exited with status 3 without a response"
        assert task["status"]["state"] == FAILED
        assert assert_gone(rpc.door, harness_pid(rpc.door, task["id"])) == 3
    finally:
        os.kill(_child_of(rpc.door, task["id"]), signal.SIGKILL)


def test_blank_lines_after_its_exit_renew_no_drain(doors):
    """A harness exits leaving a child outside its group that writes blank lines on its
    stdout: its exit fails the task at the drain's end. A blank line renews the idle
    deadline only while the harness lives; renewing the drain too, the child's lines kept
    the task running as long as they came."""
    rpc = doors(FAULTS + ["exit-leaving-setsid-blank-writer"], idle_timeout_secs=5)
    task = rpc.result("SendMessage", send_params("go", configuration=NOW))["task"]
    try:
        record = wait_state(rpc.door, task["id"], FAILED, COMPLETED, CANCELED, timeout=4.0)
        assert (record.state, record.status_text) == \
            (FAILED, "harness: exited with status 3 without a response")
    finally:
        wait_until(rpc.door, lambda: any(f["frame"] == "thinking"
                                         for f in frames_of(rpc.door, task["id"])), DEADLINE)
        os.kill(_child_of(rpc.door, task["id"]), signal.SIGKILL)


def test_a_harness_that_exits_while_its_ask_waits_behind_its_lines_fails_at_its_exit(doors):
    # NOTE: before, the exit was told (the ask woken) only once its event was queued; with
    # the lines read ahead filling the queue, the task waited for a reply nobody would take.
    rpc = doors(FAULTS + ["ask-then-exit-behind-lines"], idle_timeout_secs=5)
    task = rpc.result("SendMessage", send_params("go", configuration=NOW))["task"]
    record = wait_state(rpc.door, task["id"], FAILED, CANCELED, COMPLETED)
    assert record.state == FAILED
    got = rpc.result("GetTask", {"id": task["id"]})
    assert status_text(got) == "harness: exited with status 3 without a response"
    assert assert_gone(rpc.door, harness_pid(rpc.door, task["id"])) == 3


def test_a_harness_that_answers_then_exits_leaving_a_child_completes(doors):
    rpc = doors(FAULTS + ["respond-exit-leaving-child"], idle_timeout_secs=5)
    task = rpc.result("SendMessage", send_params("go"))["task"]
    assert task["status"]["state"] == COMPLETED
    assert response_of(task) == "done"
    assert exits_within(_child_of(rpc.door, task["id"]), DEADLINE)


@pytest.mark.parametrize("mode, state", [("respond-linger", COMPLETED),
                                         ("fail-linger", FAILED)])
def test_the_task_ends_at_its_last_line_not_when_the_harness_exits(doors, mode, state):
    # The harness lingers after its response (or fail); a 5 s grace must not hold the task.
    rpc = doors(FAULTS + [mode], cancel_grace_secs=5)
    door = rpc.door
    task = rpc.result("SendMessage", send_params("go", configuration=NOW))["task"]
    wait_until(door, frame_seen(door, task["id"], "thinking"))   # its last line follows at once
    child = _child_of(door, task["id"])
    pid = harness_pid(door, task["id"])
    wait_state(door, task["id"], state, timeout=2)                # well before the grace ends
    assert rpc.result("GetTask", {"id": task["id"]})["status"]["state"] == state
    # Under task_acceptance single the capsule takes the next task at once.
    nxt = rpc.result("SendMessage", send_params("again", configuration=NOW))["task"]
    assert nxt["status"]["state"] != "TASK_STATE_REJECTED"
    wait_until(door, frame_seen(door, nxt["id"], "thinking"))
    assert pid in door.session.agent.live_pids()                  # still within its grace
    # Closing the session ends the harnesses still being reaped, well before the grace.
    door.close()
    assert door.session.agent.live_pids() == []
    assert assert_gone(door, pid) == -signal.SIGTERM
    assert exits_within(child, DEADLINE)


def test_a_harness_lingering_after_its_response_is_killed_after_the_grace(doors):
    rpc = doors(FAULTS + ["respond-linger"])                      # cancel_grace_secs 0.3
    task = rpc.result("SendMessage", send_params("go"))["task"]
    assert task["status"]["state"] == COMPLETED
    assert response_of(task) == "done"
    child = _child_of(rpc.door, task["id"])
    assert assert_gone(rpc.door, harness_pid(rpc.door, task["id"])) == -signal.SIGKILL
    assert exits_within(child, DEADLINE)                          # its group died with it


def _child_of(door, task_id):
    """The pid a harness announced with a ``child N`` thinking line."""
    (note,) = [f["text"] for f in frames_of(door, task_id) if f["frame"] == "thinking"]
    return int(note.split()[1])


def test_input_timeout_fails_the_task_and_kills_the_harness(doors):
    rpc = doors(FAULTS + ["ask"], lifecycle={"input_timeout_secs": 0.2})
    task = rpc.result("SendMessage", send_params("go"))["task"]
    assert task["status"]["state"] == INPUT_REQUIRED
    record = wait_state(rpc.door, task["id"], FAILED)
    assert record.status_text == "input-timeout"
    assert_gone(rpc.door, harness_pid(rpc.door, task["id"]))


# --- cancel ----------------------------------------------------------------------------

def _started(rpc, mode):
    task = rpc.result("SendMessage", send_params("go", configuration=NOW))["task"]
    wait_until(rpc.door, frame_seen(rpc.door, task["id"], "thinking", "ready"))
    return task["id"], harness_pid(rpc.door, task["id"])


def test_cancel_ends_the_harness_with_sigterm(doors):
    rpc = doors(FAULTS + ["wait"])
    task_id, pid = _started(rpc, "wait")
    canceled = rpc.result("CancelTask", {"id": task_id})
    assert canceled["status"]["state"] == CANCELED
    assert assert_gone(rpc.door, pid) == -signal.SIGTERM
    assert rpc.result("GetTask", {"id": task_id})["status"]["state"] == CANCELED
    (end,) = [r for r in records_of(rpc.door, "task_end") if r["task_id"] == task_id]
    assert end["exit_status"] == "canceled"


def test_a_waiting_harness_task_is_woken_by_its_cancel_not_by_a_poll(doors):
    rpc = doors(FAULTS + ["wait"], idle_timeout_secs=60)
    task_id, pid = _started(rpc, "wait")
    proc = rpc.door.session.agent._live[pid]
    waits, next_event = [], proc.next_event

    def counted(timeout):
        waits.append(timeout)
        return next_event(timeout)

    proc.next_event = counted
    threading.Event().wait(0.3)     # wait-ok: a quiet spell in which a poll would turn
    # Its one wait runs on, begun before the count or (the ready frame just handled) just
    # after it, for the whole idle timeout: no slices.
    assert len(waits) <= 1 and all(timeout > 30 for timeout in waits), waits
    before = len(waits)
    assert rpc.result("CancelTask", {"id": task_id})["status"]["state"] == CANCELED
    assert rpc.door.session.manager.wait_agent_returned(task_id, DEADLINE)
    assert len(waits) <= before + 1   # woken once, by the cancel's own event
    assert assert_gone(rpc.door, pid) == -signal.SIGTERM


def test_cancel_sends_sigkill_after_the_grace_to_a_harness_ignoring_sigterm(doors):
    rpc = doors(FAULTS + ["ignore-term"])
    task_id, pid = _started(rpc, "ignore-term")
    assert rpc.result("CancelTask", {"id": task_id})["status"]["state"] == CANCELED
    assert assert_gone(rpc.door, pid) == -signal.SIGKILL
    assert rpc.result("GetTask", {"id": task_id})["status"]["state"] == CANCELED


def test_a_canceled_harness_keeps_the_capsule_busy_until_it_is_gone(doors):
    # Under single, the slot is free only once the canceled harness has ended: here it
    # ignores SIGTERM and its grace is long, so only the test's own SIGKILL ends it.
    rpc = doors(FAULTS + ["ignore-term"], cancel_grace_secs=DEADLINE)
    task_id, pid = _started(rpc, "ignore-term")
    assert rpc.result("CancelTask", {"id": task_id})["status"]["state"] == CANCELED
    busy = rpc.result("SendMessage", send_params("again", configuration=NOW))["task"]
    assert busy["status"]["state"] == "TASK_STATE_REJECTED"
    assert status_text(busy) == "task rejected: capsule is busy"
    os.kill(pid, signal.SIGKILL)
    assert rpc.door.session.manager.wait_agent_returned(task_id, DEADLINE)
    assert assert_gone(rpc.door, pid) == -signal.SIGKILL
    nxt_id, nxt_pid = _started(rpc, "ignore-term")             # accepted now
    os.kill(nxt_pid, signal.SIGKILL)
    record = wait_state(rpc.door, nxt_id, FAILED)
    assert record.status_text == "harness: was killed by SIGKILL without a response"
    assert_gone(rpc.door, nxt_pid)


def test_cancel_ends_a_harness_that_closed_its_stdout(doors):
    # Only a cancel can end it before the idle limit: the door must not wait that out.
    grace = 0.3
    rpc = doors(FAULTS + ["close-stdout"], idle_timeout_secs=60, cancel_grace_secs=grace)
    task_id, pid = _started(rpc, "close-stdout")
    assert rpc.result("CancelTask", {"id": task_id})["status"]["state"] == CANCELED
    gone, returncode = rpc.door.session.agent.wait_gone(pid, grace + 3)
    assert gone, f"harness {pid} still running after the cancel"
    assert returncode == -signal.SIGTERM


def test_cancel_while_the_harness_asks(doors):
    rpc = doors(FAULTS + ["ask"])
    task = rpc.result("SendMessage", send_params("go"))["task"]
    assert task["status"]["state"] == INPUT_REQUIRED
    assert rpc.result("CancelTask", {"id": task["id"]})["status"]["state"] == CANCELED
    assert assert_gone(rpc.door, harness_pid(rpc.door, task["id"])) == -signal.SIGTERM


def test_closing_the_door_ends_a_running_harness(doors):
    rpc = doors(FAULTS + ["ignore-term"])
    task_id, pid = _started(rpc, "ignore-term")
    rpc.door.close()
    assert assert_gone(rpc.door, pid) == -signal.SIGKILL
    record = wait_state(rpc.door, task_id, CANCELED)
    assert record.terminal


def test_a_harness_agent_can_be_embedded_without_yaml(home):
    agent = HarnessAgent({"process": UPPER_PY, "idle_timeout_secs": 5})
    door = create_app(process_manifest(UPPER_PY), agent=agent, trace=False)
    try:
        task = Rpc(door).result("SendMessage", send_params("embedded"))["task"]
        assert response_of(task) == "EMBEDDED"
    finally:
        door.close()
    assert agent.live_pids() == []                  # close() returns once each is reaped
    assert not (home / "records").exists()
