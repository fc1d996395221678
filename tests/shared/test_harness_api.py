"""The harness's lines for the agent API: artifacts, usage, complete, reject (docs/harness.md)."""
from __future__ import annotations

import base64
import json
import sys

import pytest

from tests.agents_util import (REPO, events_of, frames_of, harness_rpc, response_of,
                               status_text, tmp_home)
from tests.tasks_util import send_params

SCRIPT = [sys.executable, str(REPO / "tests" / "harness_script.py")]


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


@pytest.fixture
def run():
    opened = []

    def run_lines(*lines, params=None, headers=None):
        rpc = harness_rpc(SCRIPT + [json.dumps(line) if isinstance(line, dict) else line
                                    for line in lines])
        opened.append(rpc.door)
        task = rpc.result("SendMessage", params or send_params("go"), headers)["task"]
        return rpc, task

    yield run_lines
    for door in opened:
        door.close()


def updates(rpc, task):
    return [(u["artifact"]["artifactId"], u["append"], u["lastChunk"],
             [p.get("text", p.get("data")) for p in u["artifact"]["parts"]])
            for u in (e["artifactUpdate"] for e in events_of(rpc.door, task["id"])
                      if "artifactUpdate" in e)]


def test_the_task_line_carries_the_message_and_the_caller(run):
    params = {"message": {"messageId": "m-h", "role": "ROLE_USER", "contextId": "ctx-h",
                          "parts": [{"text": "go"}, {"data": {"k": 1}}],
                          "metadata": {"a": 1}, "extensions": ["urn:x"]}}
    rpc, task = run({"type": "response", "text": "@task"}, params=params)
    line = json.loads(response_of(task))
    assert line["message"] == {"messageId": "m-h", "contextId": "ctx-h", "role": "ROLE_USER",
                               "parts": [{"text": "go"}, {"data": {"k": 1}}],
                               "metadata": {"a": 1}, "extensions": ["urn:x"]}
    assert line["caller"] is None


def test_artifacts_usage_and_complete(run):
    pdf = base64.b64encode(b"%PDF-1").decode()
    rpc, task = run(
        {"type": "artifact-add", "name": "table", "description": "rows",
         "parts": [{"data": {"rows": 2}}, {"raw": pdf, "mediaType": "application/pdf",
                                           "filename": "t.pdf"}]},
        {"type": "artifact-chunk", "name": "log", "part": {"text": "a"}},
        {"type": "artifact-chunk", "name": "log", "part": {"text": "b"}, "last": True},
        {"type": "artifact-chunk", "name": "open", "part": {"text": "left open"}},
        {"type": "usage", "inputTokens": 10, "outputTokens": 3, "model": "m1"},
        {"type": "usage", "inputTokens": 1, "cachedTokens": 1, "model": "m1"},
        {"type": "complete", "text": "answer", "statusMessage": "done well"})
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert status_text(task) == "done well" and response_of(task) == "answer"
    assert [a["artifactId"] for a in task["artifacts"]] == ["table", "log", "open", "response"]
    assert task["artifacts"][0]["parts"][1] == {"raw": pdf, "mediaType": "application/pdf",
                                                "filename": "t.pdf"}
    # "open" was still open when the harness answered: the door closed it.
    assert updates(rpc, task) == [
        ("table", False, True, [{"rows": 2}, None]), ("log", False, False, ["a"]),
        ("log", True, True, ["b"]), ("open", False, False, ["left open"]),
        ("open", True, True, []), ("response", False, True, ["answer"])]
    totals = rpc.door.session.store.get(task["id"]).usage.totals
    assert (totals.input_tokens, totals.output_tokens, totals.cached_tokens) == (11, 3, 1)


def test_complete_without_text_writes_no_response(run):
    rpc, task = run({"type": "complete"})
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert status_text(task) == "task completed" and "artifacts" not in task


def test_reject_ends_the_task_rejected(run):
    rpc, task = run({"type": "reject", "message": "not  my\njob"})
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert status_text(task) == "not my job"


@pytest.mark.parametrize("line, message", [
    ({"type": "artifact-add", "name": "x", "parts": []},
     "harness: line 1 (artifact-add): parts must be a non-empty array of parts"),
    ({"type": "artifact-add", "name": "x", "parts": [{"text": "a", "url": "b"}]},
     "harness: line 1 (artifact-add): parts[0] must set exactly one of text, raw, url and "
     "data"),
    ({"type": "artifact-add", "name": "x", "parts": [{"raw": "%%"}]},
     "harness: line 1 (artifact-add): parts[0] raw is not base64"),
    ({"type": "artifact-add", "name": "response", "parts": [{"text": "a"}]},
     "harness: line 1 (artifact-add): artifact name 'response' is the door's own; "
     "choose another"),
    ({"type": "artifact-chunk", "name": "x"},
     "harness: line 1 (artifact-chunk): part is required unless last is true"),
    ({"type": "artifact-chunk", "name": "x", "part": {"text": 1}},
     "harness: line 1 (artifact-chunk): part text must be a string"),
    ({"type": "usage", "inputTokens": -1},
     "harness: line 1 (usage): inputTokens must be a non-negative integer"),
    ({"type": "usage", "outputTokens": True},
     "harness: line 1 (usage): outputTokens must be a non-negative integer"),
    ({"type": "complete", "statusMessage": 3},
     "harness: line 1 (complete): statusMessage must be a string"),
    ({"type": "reject"}, "harness: line 1 (reject): message must be a string"),
], ids=["no-parts", "two-kinds", "bad-base64", "reserved-name", "no-part", "bad-text",
        "negative", "bool-count", "bad-status", "no-message"])
def test_a_bad_api_line_fails_the_task(run, line, message):
    rpc, task = run(line)
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == message


def test_a_second_artifact_of_one_name_fails_the_task(run):
    rpc, task = run({"type": "artifact-add", "name": "x", "parts": [{"text": "a"}]},
                    {"type": "artifact-chunk", "name": "x", "part": {"text": "b"}})
    assert status_text(task) == ("harness: line 2 (artifact-chunk): artifact 'x' was already "
                                 "written in this task")


@pytest.mark.parametrize("line", [
    '{"type":"quota","used":1e999}',
    '{"type":"tool-call-started","toolName":"t","input":-1e999}',
], ids=["quota", "tool-call"])
def test_a_number_past_a_double_fails_as_a_value_not_json(run, line, caplog):
    # NOTE: before, a quota line's 1e999 (json reads it as inf) escaped the frame's own
    # check as a ValueError: "the agent failed: ValueError" and a logged traceback.
    rpc, task = run(line, {"type": "response", "text": "never"})
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == "the agent's answer is not valid JSON"
    assert not [r for r in caplog.records if r.exc_info]


def test_a_quota_line_cannot_rename_its_frame(run):
    # NOTE: before, a "frame" field replaced the frame's name: a harness wrote numbered
    # events that streams read as the door's own gap and capsule-closed frames.
    rpc, task = run({"type": "quota", "frame": "capsule-closed", "used": 3},
                    {"type": "quota", "frame": "gap", "firstAvailableId": 999},
                    {"type": "response", "text": "done"})
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    quotas = [f for f in frames_of(rpc.door, task["id"]) if f["frame"] != "text"]
    assert quotas == [{"frame": "quota", "used": 3}, {"frame": "quota", "firstAvailableId": 999}]
    assert [list(f) for f in quotas] == [["frame", "used"], ["frame", "firstAvailableId"]]
