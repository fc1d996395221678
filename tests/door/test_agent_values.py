"""The door: an agent's bad value ends its task FAILED at once; a dict answers JSON text."""
from __future__ import annotations

import logging
import time

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.agents import NOT_JSON
from tests.agents_util import frames_of, one_task, response_of, status_text, tmp_home, tried
from tests.conftest import Rpc
from tests.shared import bad_values_agent
from tests.shared.json_util import strict_json
from tests.tasks_util import DEADLINE, NOW, send_params, wait_state


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


@pytest.fixture
def rpc():
    door = create_app({"name": "bad-values", "version": "0.1.0",
                       "lifecycle": {"task_acceptance": "queue"}},
                      agent=bad_values_agent.bad)
    yield Rpc(door)
    door.close()


@pytest.mark.parametrize("ending", bad_values_agent.ENDINGS)
@pytest.mark.timed
def test_a_bad_value_ends_the_task_failed_at_once(rpc, ending, caplog):
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="murmur_wsgi.door.tasks.manager"):
        task = rpc.result("SendMessage", send_params(ending))["task"]
    assert time.monotonic() - started < 1.0
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == NOT_JSON
    assert any("not JSON" in r.getMessage() for r in caplog.records)
    for method, params in (("GetTask", {"id": task["id"]}), ("ListTasks", {})):
        body = strict_json(rpc.call(method, params).get_data())
        assert "result" in body, body


def test_a_dict_answers_json_text():
    door = create_app({"name": "counts", "version": "0.1.0"}, agent=bad_values_agent.counts)
    try:
        task = Rpc(door).result("SendMessage", send_params("one two three"))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert response_of(task) == '{"words":3}'
    finally:
        door.close()


def test_a_bad_value_caught_by_the_agent_never_reaches_the_task():
    with one_task(tried(lambda ctx: ctx.write(bad_values_agent.SURROGATE), ok="taken"),
                  "catches") as (_, task):
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert response_of(task) == "refused: AgentValueError"


@pytest.mark.parametrize("question", [5, {"a": 1}, ["a"], b"raw", None])
def test_a_question_that_is_not_a_string_fails_the_task_and_every_read_serves(question):
    def agent(ctx):
        return ctx.ask(question).text

    door = create_app({"name": "asks", "version": "0.1.0"}, agent=agent)
    try:
        rpc = Rpc(door)
        task = rpc.result("SendMessage", send_params("go"))["task"]
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert status_text(task) == NOT_JSON
        assert "artifacts" not in task
        for method, params in (("GetTask", {"id": task["id"]}), ("ListTasks", {})):
            body = strict_json(rpc.call(method, params).get_data())
            assert "result" in body, body
    finally:
        door.close()


class _RaisingStr(str):
    """A str whose own methods raise: reading it is the agent's code running."""

    def isascii(self):
        raise RuntimeError("an agent's own str")


class _PosingAsStr:
    """An object that answers isinstance(x, str) with True."""

    @property
    def __class__(self):
        return str


class _RaisingDict(dict):
    def items(self):
        raise RuntimeError("an agent's own dict")


@pytest.mark.parametrize("value", [_RaisingStr("é"), _PosingAsStr(), _RaisingDict(a=1)],
                         ids=["str-subclass", "posing-as-str", "dict-subclass"])
def test_a_value_that_raises_when_read_still_ends_its_task(value):
    def agent(ctx):
        return value if "first" in ctx.text else "second"

    door = create_app({"name": "odd-values", "version": "0.1.0"}, agent=agent)
    try:
        rpc = Rpc(door)
        first = rpc.result("SendMessage", send_params("first", NOW))["task"]["id"]
        ended = wait_state(door, first, "TASK_STATE_FAILED", "TASK_STATE_COMPLETED")
        assert ended.state == "TASK_STATE_FAILED"
        assert ended.status_text.startswith("the agent failed: "), ended.status_text
        assert door.session.manager.wait_agent_returned(first, DEADLINE)
        # The slot is free: the next task runs.
        task = rpc.result("SendMessage", send_params("next"))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert response_of(task) == "second"
    finally:
        door.close()


FRAME_CALLS = {
    "write-final": lambda ctx: ctx.write("x", final="yes"),
    "tool-name": lambda ctx: ctx.tool_call_started(5),
    "tool-call-id": lambda ctx: ctx.tool_call_started("t", None, 7),
    "progress-call-id": lambda ctx: ctx.tool_call_progress(None, "x"),
    "artifact-duration": lambda ctx: ctx.artifact("t", "x", duration_ms="5"),
    "artifact-is-error": lambda ctx: ctx.artifact("t", "x", is_error=1),
    "artifact-exit-code": lambda ctx: ctx.artifact("t", "x", exit_code=True),
    "artifact-tool-name": lambda ctx: ctx.artifact(None, "x"),
    # ctx.frame, the public call for any frame, holds a fixed frame to its keys and types
    "frame-text-final": lambda ctx: ctx.frame("text", "x", {"text": "x", "final": "yes"}),
    "frame-tool-name": lambda ctx: ctx.frame("tool-call-started", "t",
                                             {"toolCallId": "c", "toolName": 5, "input": None}),
    "frame-artifact-keys": lambda ctx: ctx.frame("artifact", "x",
                                                 {"toolName": "t", "isError": 1}),
    "frame-progress-id": lambda ctx: ctx.frame("tool-call-progress", "x",
                                               {"toolCallId": None, "text": "x"}),
}


@pytest.mark.parametrize("call", sorted(FRAME_CALLS))
def test_a_frame_field_of_the_wrong_type_is_refused_in_the_call(call):
    with one_task(tried(FRAME_CALLS[call], TypeError), "frames") as (door, task):
        assert response_of(task) == "refused: AgentValueError"
        assert frames_of(door, task["id"]) == []           # nothing was published


def test_frame_fields_of_their_types_are_written():
    def agent(ctx):
        call_id = ctx.tool_call_started("t", {"a": 1}, "c1")
        ctx.tool_call_progress(call_id, "half")
        ctx.artifact("t", "out", fence_source=None, tool_call_id=call_id, is_error=False,
                     duration_ms=5, exit_code=0, truncated=None)
        ctx.write("done", final=True)
        return "written"

    door = create_app({"name": "frames", "version": "0.1.0"}, agent=agent)
    try:
        task = Rpc(door).result("SendMessage", send_params("go"))["task"]
        assert response_of(task) == "written"
        assert [f["frame"] for f in frames_of(door, task["id"])] == \
            ["tool-call-started", "tool-call-progress", "artifact", "text"]
    finally:
        door.close()
