"""The agent API: ctx.message, ctx.caller, named artifacts, endings, usage."""
from __future__ import annotations

import base64
import json
import threading
import time

import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format

from murmur_wsgi import create_app
from murmur_wsgi.agents import (Completed, DataPart, FilePart, Message, RunUsage, TaskRejected,
                                TextPart, UrlPart, as_part)
from tests.agents_util import events_of, response_of, status_text, tmp_home
from tests.conftest import Rpc
from tests.sse_util import open_stream
from tests.tasks_util import DEADLINE, send_params

MANIFEST = {"name": "api-agent", "version": "0.1.0"}
AUTH = {"scheme": "bearer", "credentials": {"alpha": {"scopes": ["SendMessage", "GetTask"]}}}
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 8


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


@pytest.fixture
def doors():
    opened = []

    def open_door(agent, **manifest):
        rpc = Rpc(create_app(dict(MANIFEST, **manifest), agent=agent))
        opened.append(rpc.door)
        return rpc

    yield open_door
    for door in opened:
        door.close()


def run(rpc, params=None, headers=None):
    return rpc.result("SendMessage", params or send_params("hello"), headers)["task"]


def completed_within(rpc, seconds: float, clock) -> dict:
    """The task of one SendMessage, COMPLETED within ``seconds`` by ``clock``."""
    started = clock()
    task = run(rpc)
    assert clock() - started < seconds
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return task


def strict_task(task: dict):
    """Parse a task strictly as an a2a-sdk Task (unknown fields refused)."""
    return json_format.Parse(json.dumps(task), a2a_pb2.Task())


# --- what the agent reads --------------------------------------------------------

def test_ctx_message_is_the_typed_incoming_message(doors):
    seen = {}

    def agent(ctx):
        seen.update(message=ctx.message, caller=ctx.caller, text=ctx.text)
        return "ok"

    meta = {"trace": {"id": 7}}
    params = {"message": {
        "messageId": "m-typed", "contextId": "ctx-typed", "role": "ROLE_USER",
        "parts": [{"text": "hi", "metadata": {"lang": "en"}},
                  {"data": {"n": 1}, "mediaType": "application/json", "filename": "n.json"},
                  {"raw": base64.b64encode(PNG).decode(), "mediaType": "image/png",
                   "filename": "dot.png"}],
        "metadata": meta, "extensions": ["https://example.com/ext"],
        "referenceTaskIds": ["tsk_x", "tsk_y", "tsk_x"]}}
    run(doors(agent), params)
    message = seen["message"]
    assert isinstance(message, Message)
    assert (message.message_id, message.context_id, message.task_id) == (
        "m-typed", "ctx-typed", None)
    assert message.parts == (TextPart("hi", None, None, {"lang": "en"}),
                             DataPart({"n": 1}, "application/json", "n.json"),
                             FilePart(PNG, "image/png", "dot.png"))
    assert message.metadata == meta
    assert message.extensions == ("https://example.com/ext",)
    assert message.reference_task_ids == ("tsk_x", "tsk_y")
    assert message.text_parts == ["hi"] and message.data_parts == [{"n": 1}]
    assert seen["caller"] is None                           # a public door
    assert seen["text"].startswith("<untrusted-content source=task:event>\nhi\n")


def test_ctx_caller_names_the_credential(doors):
    seen = []
    rpc = doors(lambda ctx: seen.append(ctx.caller), network={"authentication": AUTH})
    tokens = rpc.door.tokens.tokens
    for name in ("alpha", "operator"):
        run(rpc, headers={"Authorization": f"Bearer {tokens[name]}"})
    assert seen == ["alpha", "operator"]


def test_message_round_trips_through_its_wire_form():
    wire = {"messageId": "m", "contextId": "c", "taskId": "t", "role": "ROLE_USER",
            "parts": [{"text": "a", "mediaType": "text/plain"},
                      {"url": "https://example.com/x", "mediaType": "text/html"},
                      {"raw": base64.b64encode(b"\x00\x01").decode(), "filename": "b.bin"},
                      {"data": [1, 2]}],
            "metadata": {"k": "v"}, "extensions": ["u"], "referenceTaskIds": ["r"]}
    message = Message.from_wire(wire)
    assert message.parts[1] == UrlPart("https://example.com/x", "text/html")
    assert message.parts[2].raw == b"\x00\x01"
    assert message.to_wire() == wire
    json_format.Parse(json.dumps(wire), a2a_pb2.Message())


@pytest.mark.parametrize("value, part", [
    ("t", TextPart("t")),
    (b"\x01", FilePart(b"\x01")),
    ({"a": 1}, DataPart({"a": 1})),
    ([1], DataPart([1])),
    (UrlPart("https://x"), UrlPart("https://x")),
], ids=["str", "bytes", "dict", "list", "part"])
def test_as_part(value, part):
    assert as_part(value) == part


def test_as_part_refuses_other_values():
    with pytest.raises(TypeError):
        as_part(3)


# --- artifacts -------------------------------------------------------------------

def artifacts_agent(ctx):
    ctx.artifacts.add("report", ["two parts", {"rows": 2}], description="the report",
                      metadata={"v": 1})
    ctx.artifacts.add("file", FilePart(b"%PDF-1", "application/pdf", "r.pdf"))
    ctx.artifacts.add("link", UrlPart("https://example.com/r", "text/html"))
    with ctx.artifacts.stream("log") as out:
        out.write("line 1\n")
        out.write(TextPart("line 2\n"))
    return "done"


def test_named_artifacts_on_the_task_before_the_response(doors):
    task = run(doors(artifacts_agent))
    strict_task(task)
    assert [a["artifactId"] for a in task["artifacts"]] == [
        "report", "file", "link", "log", "response"]
    report, file, link, log, _ = task["artifacts"]
    assert report == {"artifactId": "report", "name": "report", "description": "the report",
                      "parts": [{"text": "two parts", "mediaType": "text/plain"},
                                {"data": {"rows": 2}, "mediaType": "application/json"}],
                      "metadata": {"v": 1}}
    assert file["parts"] == [{"raw": base64.b64encode(b"%PDF-1").decode(),
                              "mediaType": "application/pdf", "filename": "r.pdf"}]
    assert link["parts"] == [{"url": "https://example.com/r", "mediaType": "text/html"}]
    assert [p["text"] for p in log["parts"]] == ["line 1\n", "line 2\n"]
    assert response_of(task) == "done"


def test_artifact_events_stream_as_a2a_artifact_updates(doors):
    rpc = doors(artifacts_agent)
    stream = open_stream(rpc, "SendStreamingMessage", send_params("go"))
    events = stream.rest()            # every event parsed strictly as a StreamResponse
    updates = [(e.body["artifact"]["artifactId"], e.body["append"], e.body["lastChunk"],
                len(e.body["artifact"]["parts"]))
               for e in events if e.kind == "artifactUpdate"]
    assert updates == [("report", False, True, 2), ("file", False, True, 1),
                       ("link", False, True, 1), ("log", False, False, 1),
                       ("log", True, False, 1), ("log", True, True, 0),
                       ("response", False, True, 1)]
    assert events[-1].state == "TASK_STATE_COMPLETED"


@pytest.mark.timed
def test_many_chunks_cost_linear_time(doors):
    # Each chunk once copied the artifact's whole parts list under the store's lock:
    # 80,000 one-character chunks took 8.3 s (20,000: 0.8 s); now 0.5 s.
    chunks = 80_000

    def agent(ctx):
        with ctx.artifacts.stream("log") as out:
            for i in range(chunks):
                out.write(str(i % 10))
        return "done"

    task = completed_within(doors(agent), 3.0, time.monotonic)
    log = task["artifacts"][0]
    assert log["artifactId"] == "log"
    assert "".join(p["text"] for p in log["parts"]) == "0123456789" * (chunks // 10)


@pytest.mark.timed
def test_a_chunk_among_many_artifacts_costs_the_same(doors):
    # Each chunk once searched the task's artifacts for its own, from the newest: a stream
    # opened before 10,000 others cost 10,000 looks a chunk (10,000 chunks: 4.2 s of CPU,
    # 20,000: 16.5 s); now 0.3 s.
    count = 10_000

    def agent(ctx):
        out = ctx.artifacts.stream("log")
        out.write("<")
        for i in range(count):
            ctx.artifacts.add(f"a{i}", str(i))
        for i in range(count):
            out.write(str(i % 10))
        out.close()
        return "done"

    task = completed_within(doors(agent), 1.5, time.process_time)
    names = [artifact["artifactId"] for artifact in task["artifacts"]]
    assert names == ["log"] + [f"a{i}" for i in range(count)] + ["response"]
    log = task["artifacts"][0]
    assert "".join(p["text"] for p in log["parts"]) == "<" + "0123456789" * (count // 10)
    assert task["artifacts"][count]["parts"][0]["text"] == str(count - 1)


def test_a_chunk_marked_last_closes_the_stream(doors):
    def agent(ctx):
        out = ctx.artifacts.stream("tokens")
        out.write("a")
        out.write("b", last=True)
        out.close()                                 # nothing more: it was closed
        with pytest.raises(ValueError, match="closed"):
            out.write("c")
        return None

    rpc = doors(agent)
    task = run(rpc)
    updates = [e["artifactUpdate"] for e in events_of(rpc.door, task["id"])
               if "artifactUpdate" in e]
    assert [(u["append"], u["lastChunk"]) for u in updates] == [(False, False), (True, True)]
    assert [a["artifactId"] for a in task["artifacts"]] == ["tokens"]     # no response


@pytest.mark.parametrize("name, message", [
    ("report", "already written"), ("response", "the door's own"),
    ("prompt", "the door's own"), ("residue", "the door's own"), ("", "non-empty"),
])
def test_artifact_names_are_unique_and_not_the_doors(doors, name, message):
    raised = []

    def agent(ctx):
        ctx.artifacts.add("report", "first")
        try:
            ctx.artifacts.add(name, "again")
        except ValueError as ex:
            raised.append(str(ex))
        try:
            ctx.artifacts.stream(name)
        except ValueError as ex:
            raised.append(str(ex))
        return "ok"

    task = run(doors(agent))
    assert len(raised) == 2 and all(message in text for text in raised), raised
    assert [a["artifactId"] for a in task["artifacts"]] == ["report", "response"]


def test_list_tasks_without_artifacts_omits_the_agents(doors):
    rpc = doors(lambda ctx: ctx.artifacts.add("only", "x"))
    task = run(rpc)
    assert [a["artifactId"] for a in task["artifacts"]] == ["only"]
    (bare,) = rpc.result("ListTasks", {})["tasks"]
    assert "artifacts" not in bare
    (full,) = rpc.result("ListTasks", {"includeArtifacts": True})["tasks"]
    assert full["artifacts"] == task["artifacts"]


# --- endings ---------------------------------------------------------------------

def test_completed_sets_the_final_status_message(doors):
    task = run(doors(lambda ctx: Completed(text="the answer", status_message="all good")))
    strict_task(task)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert status_text(task) == "all good"
    assert response_of(task) == "the answer"


def test_completed_without_text_writes_no_response(doors):
    task = run(doors(lambda ctx: Completed(status_message="nothing to say")))
    assert status_text(task) == "nothing to say" and "artifacts" not in task


def test_task_rejected_ends_the_task_rejected(doors):
    def agent(ctx):
        ctx.artifacts.add("partial", "kept")
        raise TaskRejected("I only take data parts")

    rpc = doors(agent)
    task = run(rpc)
    strict_task(task)
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert status_text(task) == "I only take data parts"
    assert [a["artifactId"] for a in task["artifacts"]] == ["partial"]
    assert rpc.result("GetTask", {"id": task["id"]}) == task


def test_calls_after_a_cancel_raise_task_canceled(doors):
    started, go = threading.Event(), threading.Event()
    raised = []

    def agent(ctx):
        started.set()
        go.wait(DEADLINE)
        for call in (lambda: ctx.artifacts.add("late", "x"),
                     lambda: ctx.artifacts.stream("late2").write("x")):
            try:
                call()
            except Exception as ex:  # noqa: BLE001 - the test records what was raised
                raised.append(type(ex).__name__)
        return "never seen"

    rpc = doors(agent)
    task = run(rpc, send_params("go", configuration={"returnImmediately": True}))
    assert started.wait(DEADLINE)
    rpc.result("CancelTask", {"id": task["id"]})
    go.set()
    assert rpc.door.session.manager.wait_agent_returned(task["id"], DEADLINE)
    assert raised == ["TaskCanceled", "TaskCanceled"]
    assert "artifacts" not in rpc.result("GetTask", {"id": task["id"]})


# --- usage -----------------------------------------------------------------------

def test_usage_accumulates_per_model_on_the_record_and_stays_off_the_wire(doors):
    def agent(ctx):
        ctx.usage(input_tokens=100, output_tokens=20, model="small")
        ctx.usage(input_tokens=1000, output_tokens=500, cached_tokens=100, model="big")
        ctx.usage(input_tokens=5, output_tokens=1, model="small")
        return "ok"

    rpc = doors(agent)
    task = run(rpc)
    usage = rpc.door.session.store.get(task["id"]).usage
    assert isinstance(usage, RunUsage)
    assert usage.models == ["small", "big"] and usage.top_model == "big"
    totals = usage.totals
    assert (totals.input_tokens, totals.output_tokens, totals.cached_tokens) == (1105, 521, 100)
    assert usage.to_dict()["by_model"]["small"] == {
        "input_tokens": 105, "output_tokens": 21, "cached_tokens": 0}
    assert "usage" not in json.dumps(task)
    assert rpc.result("GetTask", {"id": task["id"]}) == task


def test_usage_after_a_cancel_raises_task_canceled_and_is_not_kept(doors):
    # NOTE: before, usage was the one call a canceled task's agent could still make: each
    # new model (up to tasks.max_usage_models, names up to max_output_bytes) stayed on the
    # finished task, outside the size retention had counted for it at its end.
    started, done, raised = threading.Event(), threading.Event(), []

    def agent(ctx):
        started.set()
        while not ctx.wait(DEADLINE):
            pass
        try:
            ctx.usage(input_tokens=1, model="m" * 3000)
        except Exception as ex:  # noqa: BLE001 - the test records what was raised
            raised.append(type(ex).__name__)
        finally:
            done.set()
        return "late"

    rpc = doors(agent)
    task = run(rpc, send_params("go", configuration={"returnImmediately": True}))
    assert started.wait(DEADLINE)
    canceled = rpc.result("CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert done.wait(DEADLINE)
    assert raised == ["TaskCanceled"]
    record = rpc.door.session.store.get(task["id"])
    assert record.usage is None
    assert record.held_size == record.size()


def test_usage_without_a_model_is_not_one_of_the_models_a_run_may_name():
    # NOTE: RunUsage.check_room is the bound's one home, the door's and the hub's.
    usage = RunUsage()
    for model in ("a", None, "b"):
        usage.check_room(model, 2, "tasks.max_usage_models")
        usage.add(1, 0, 0, model)
    assert usage.check_room(None, 2, "tasks.max_usage_models") is False
    with pytest.raises(ValueError, match=r"more than 2 models in one run"):
        usage.check_room("c", 2, "tasks.max_usage_models")
    fresh = RunUsage()
    fresh.add(1, 0, 0, "a")
    assert fresh.check_room(None, 1, "limits.max_usage_models") is True
    assert fresh.models == ["a"]


@pytest.mark.parametrize("kwargs", [
    {"input_tokens": -1}, {"output_tokens": 1.5}, {"cached_tokens": True}, {"model": ""},
    {"model": 3},
], ids=["negative", "float", "bool", "empty-model", "int-model"])
def test_usage_refuses_bad_counts_in_the_agents_call(doors, kwargs):
    raised = []

    def agent(ctx):
        try:
            ctx.usage(**kwargs)
        except ValueError as ex:
            raised.append(str(ex))
        return "ok"

    rpc = doors(agent)
    task = run(rpc)
    assert len(raised) == 1 and raised[0].startswith("usage: ")
    assert rpc.door.session.store.get(task["id"]).usage is None


def test_an_artifact_is_fixed_when_published(doors):
    def agent(ctx):
        data, meta = {"n": 1}, {"k": "v"}
        ctx.artifacts.add("table", data, metadata=meta)
        with ctx.artifacts.stream("rows") as out:
            row = {"r": 1}
            out.write(row)
            row["r"] = 2                            # changes nothing published
        data["n"], meta["k"] = 2, "changed"
        return "ok"

    rpc = doors(agent)
    task = run(rpc)
    table, rows, _ = task["artifacts"]
    assert table["parts"][0]["data"] == {"n": 1} and table["metadata"] == {"k": "v"}
    assert rows["parts"][0]["data"] == {"r": 1}
    streamed = [e["artifactUpdate"]["artifact"] for e in events_of(rpc.door, task["id"])
                if "artifactUpdate" in e]
    assert streamed[0]["parts"][0]["data"] == {"n": 1}


@pytest.mark.parametrize("value", [float("nan"), {"s": {1, 2}}, [object()]],
                         ids=["nan", "set", "object"])
def test_an_artifact_that_is_not_json_is_refused_in_the_call(doors, value):
    raised = []

    def agent(ctx):
        try:
            ctx.artifacts.add("bad", DataPart(value))
        except (TypeError, ValueError) as ex:
            raised.append(str(ex))
        ctx.artifacts.add("bad", "the name is still free")
        return None

    task = run(doors(agent))
    assert len(raised) == 1 and raised[0].startswith("artifact 'bad': not a JSON value")
    assert task["artifacts"][0]["parts"] == [{"text": "the name is still free",
                                              "mediaType": "text/plain"}]


def test_a_stream_left_open_is_closed_as_the_agent_returns(doors):
    def agent(ctx):
        ctx.artifacts.stream("notes").write("half")
        return "done"

    rpc = doors(agent)
    task = run(rpc)
    updates = [(e["artifactUpdate"]["artifact"]["artifactId"], e["artifactUpdate"]["append"],
                e["artifactUpdate"]["lastChunk"])
               for e in events_of(rpc.door, task["id"]) if "artifactUpdate" in e]
    assert updates == [("notes", False, False), ("notes", True, True), ("response", False, True)]
