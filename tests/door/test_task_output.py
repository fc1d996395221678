"""A task's output is bounded: past ``tasks.max_output_bytes`` it ends FAILED, its agent stopped.

What a running agent writes (named artifacts, progress, frames, the models its usage names)
the door holds on the task while it runs: without a bound, an agent streaming artifact
chunks held all it wrote (256 MiB written, 257 MiB held) until the process died.
"""
from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.agents import TaskCanceled
from murmur_wsgi.door.manifest import load_manifest
from murmur_wsgi.settings import ManifestError
from tests.agents_util import (REPO, assert_gone, harness_pid, process_manifest, records_of,
                               status_text, tmp_home)
from tests.conftest import Rpc
from tests.tasks_util import DEADLINE, send_params

LIMIT = 256 * 1024
CHUNK = 16 * 1024
PASSED = f"the agent wrote more than {LIMIT} bytes (tasks.max_output_bytes) and was stopped"
SCRIPT = [sys.executable, str(REPO / "tests" / "harness_script.py")]


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


def _write(ctx, mode: str, i: int) -> None:
    """One write of ``mode``, about CHUNK bytes, distinct from every other."""
    text = f"{i:08d}" + "x" * (CHUNK - 8)
    if mode == "chunk":
        ctx.artifacts.open("log").write(text)
    elif mode == "names":
        ctx.artifacts.add(f"part-{i}", text)
    elif mode == "progress":
        ctx.progress(text)
    elif mode == "text":
        ctx.write(text)
    else:                                   # a new model each time, named at length
        ctx.usage(input_tokens=1, model=text)


class Flood:
    """An agent making ``count`` writes of its message's mode; it records how many were
    taken and how many of its calls were refused (TaskCanceled) after; ``returned`` is set
    when its call ends (its task may have ended before: at the write that passed the bound)."""

    def __init__(self):
        self.taken, self.refused = 0, 0
        self.returned = threading.Event()

    def __call__(self, ctx):
        self.returned.clear()
        try:
            return self._writes(ctx)
        finally:
            self.returned.set()

    def _writes(self, ctx):
        mode, count = ctx.message.parts[0].text.split()
        if mode == "chunk":
            ctx.artifacts.stream("log")
        try:
            for i in range(int(count)):
                _write(ctx, mode, i)
                self.taken += 1
        except TaskCanceled:
            self.refused += 1
            with pytest.raises(TaskCanceled):   # every later call is refused too
                _write(ctx, mode, -1)
            self.refused += 1
            raise
        return "done"


@pytest.fixture
def flood():
    agent = Flood()
    door = create_app({"name": "flood", "version": "0.1.0",
                       "tasks": {"max_output_bytes": LIMIT}}, agent=agent, trace=True)
    yield Rpc(door), agent
    door.close()


def _held_bytes(record) -> int:
    """The characters of the texts the task holds in its artifacts and usage."""
    parts = [part for artifact in (record.agent_artifacts or {}).values()
             for part in artifact["parts"]]
    models = record.usage.models if record.usage is not None else []
    return sum(len(part["text"]) for part in parts) + sum(map(len, models))


@pytest.mark.parametrize("mode", ["chunk", "names", "progress", "text", "models"])
def test_an_agent_writing_past_max_output_bytes_fails_its_task_and_is_stopped(flood, mode,
                                                                               caplog):
    rpc, agent = flood
    caplog.set_level(logging.WARNING, logger="murmur_wsgi")
    task = rpc.result("SendMessage", send_params(f"{mode} 1000"))["task"]  # 16 MB, past 256 KiB
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == PASSED
    # Stopped at the bound: the write that passed it, and the one after, were refused.
    assert agent.returned.wait(DEADLINE)
    assert (agent.taken, agent.refused) == (agent.taken, 2)
    # (a text frame holds its text twice: as its message's part and in its fields)
    assert LIMIT // CHUNK // 2 - 1 <= agent.taken <= LIMIT // CHUNK
    record = rpc.door.session.store.get(task["id"])
    assert _held_bytes(record) <= LIMIT
    (warning,) = [r for r in caplog.records if "tasks.max_output_bytes" in r.getMessage()]
    assert warning.levelno == logging.WARNING and "xxxx" not in warning.getMessage()
    (end,) = [r for r in records_of(rpc.door, "task_end") if r["task_id"] == task["id"]]
    assert end["exit_status"] == "failed"
    # The door answers on: the failed task reads as it ended, and the next task runs.
    assert rpc.result("GetTask", {"id": task["id"]})["status"]["state"] == "TASK_STATE_FAILED"
    nxt = rpc.result("SendMessage", send_params(f"{mode} 3"))["task"]
    assert nxt["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_streamed_artifact_under_max_output_bytes_is_kept_whole(flood):
    rpc, agent = flood
    task = rpc.result("SendMessage", send_params(f"chunk {LIMIT // CHUNK - 2}"))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    (log,) = [a for a in task["artifacts"] if a["artifactId"] == "log"]
    assert [p["text"][:8] for p in log["parts"] if p] == [f"{i:08d}"
                                                         for i in range(LIMIT // CHUNK - 2)]
    assert (agent.taken, agent.refused) == (LIMIT // CHUNK - 2, 0)


def test_a_harness_writing_past_max_output_bytes_fails_its_task_and_is_ended():
    line = json.dumps({"type": "artifact-chunk", "name": "log", "part": {"text": "h" * 30_000}})
    manifest = process_manifest(SCRIPT + [line] * 5, max_line_bytes=64 * 1024)
    manifest["tasks"] = {"max_output_bytes": "64Ki"}
    door = create_app(manifest, listen="127.0.0.1:41873", trace=True)
    try:
        rpc = Rpc(door)
        task = rpc.result("SendMessage", send_params("go"))["task"]
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert status_text(task) == ("the agent wrote more than 65536 bytes "
                                     "(tasks.max_output_bytes) and was stopped")
        # The third chunk passed the bound: the task keeps the two before it.
        got = rpc.result("GetTask", {"id": task["id"]})
        assert [(a["artifactId"], len(a["parts"])) for a in got["artifacts"]] == [("log", 2)]
        # Ended as a cancel ends it (SIGTERM: the script waits on its stdin otherwise).
        assert_gone(door, harness_pid(door, task["id"]))
    finally:
        door.close()
    assert door.session.agent.live_pids() == []


def test_max_output_bytes_defaults_to_64_mib_and_has_a_floor():
    manifest = {"name": "a", "version": "1"}
    assert load_manifest(manifest).tasks["max_output_bytes"] == 64 * 1024 ** 2
    assert load_manifest(dict(manifest, tasks={"max_output_bytes": "1Mi"})).tasks[
        "max_output_bytes"] == 1024 ** 2
    with pytest.raises(ManifestError, match="max_output_bytes: must be at least 64Ki"):
        load_manifest(dict(manifest, tasks={"max_output_bytes": 65535}))


def test_a_harness_naming_more_models_than_max_usage_models_fails_its_task(caplog):
    # NOTE: before, only the models' names were counted (against max_output_bytes): each
    # model kept cost about 160 bytes more, so 500,000 models of 7-byte names (3.5 MB
    # counted) held 77 MB on the task, and kept it once the task had finished.
    lines = [json.dumps({"type": "usage", "inputTokens": 1, "model": f"m{i}"})
             for i in range(6)] + ['{"type":"response","text":"never"}']
    manifest = process_manifest(SCRIPT + lines)
    manifest["tasks"] = {"max_usage_models": 5}
    door = create_app(manifest, listen="127.0.0.1:41873", trace=True)
    try:
        task = Rpc(door).result("SendMessage", send_params("go"))["task"]
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert status_text(task) == "the agent's answer is not valid JSON"
        assert door.session.store.get(task["id"]).usage.models == [f"m{i}" for i in range(5)]
        assert "usage: more than 5 models in one run (tasks.max_usage_models)" in caplog.text
        assert_gone(door, harness_pid(door, task["id"]))
    finally:
        door.close()
    assert load_manifest({"name": "a", "version": "1"}).tasks["max_usage_models"] == 1000


@contextlib.contextmanager
def _finished(lines: list, count: int, keep_bytes: int, **manifest_options):
    """A door whose harness writes ``lines`` (after SCRIPT), ``tasks.keep_finished_bytes``
    ``keep_bytes``: ``(the ids of count messages it answered, its task store)``."""
    manifest = process_manifest(SCRIPT + lines, **manifest_options)
    manifest["tasks"] = {"keep_finished_bytes": keep_bytes}
    door = create_app(manifest, listen="127.0.0.1:41873")
    try:
        rpc = Rpc(door)
        yield ([rpc.result("SendMessage", send_params("go"))["task"]["id"]
                for _ in range(count)], door.session.store)
    finally:
        door.close()


def test_finished_tasks_count_the_models_their_usage_names():
    # NOTE: before, TaskRecord.size() left usage out: a harness naming models of 3,000
    # characters made six finished tasks hold 18,000 bytes of names under a 10,000-byte
    # keep_finished_bytes (counted: under 600 each); up to 64 MiB a task at the defaults.
    lines = [json.dumps({"type": "usage", "inputTokens": 1, "model": "m" * 3000}),
             '{"type":"response","text":"r"}']
    with _finished(lines, 6, 10_000, max_line_bytes=64 * 1024) as (ids, store):
        kept = [store.get(task_id) for task_id in ids if store.get(task_id) is not None]
        assert 1 <= len(kept) <= 3
        assert all(record.size() > 3000 for record in kept)
        assert store._bytes_total == sum(record.size() for record in kept) <= 10_000


def test_finished_tasks_count_the_parts_their_artifacts_hold():
    # NOTE: before, a kept part counted its JSON alone ({"text":""}: 11 bytes) but held
    # about 245: a harness streaming empty chunks made each finished task hold ~21 times
    # what retention counted (64 MiB of output: 27 MB held, 1.25 MB counted).
    lines = ['{"type":"artifact-chunk","name":"log","part":{"text":""}}'] * 2000
    with _finished(lines + ['{"type":"response","text":"r"}'], 4, 100_000) as (ids, store):
        # Each holds 2,000 parts (about 490 KB): only the newest stays, bound or not.
        assert [store.get(task_id) is not None for task_id in ids] == [False] * 3 + [True]
        assert store.get(ids[-1]).size() > 2000 * 200


def test_finished_tasks_count_the_artifacts_they_hold():
    # NOTE: before, a kept artifact counted its JSON (and its parts) alone, but held about
    # 800 bytes more (its dicts, its list, its names): 20,000 artifacts of one empty part
    # held 21.9 MB, counted 6.0 MB.
    lines = [json.dumps({"type": "artifact-add", "name": f"a{i}", "parts": [{"text": ""}]})
             for i in range(2000)]
    with _finished(lines + ['{"type":"response","text":"r"}'], 2, 1_500_000) as (ids, store):
        # Each holds 2,000 artifacts (about 2 MB): only the newest stays.
        assert [store.get(task_id) is not None for task_id in ids] == [False, True]
        assert store.get(ids[-1]).size() > 2000 * 900


def test_usage_without_a_model_is_not_counted_as_one_of_max_usage_models():
    # NOTE: tokens reported without a model name no model: at max_usage_models 2, two
    # named models and one unnamed report are within the bound.
    lines = [json.dumps({"type": "usage", "inputTokens": 1, "model": "a"}),
             json.dumps({"type": "usage", "inputTokens": 1, "model": "b"}),
             json.dumps({"type": "usage", "inputTokens": 4}),
             '{"type":"response","text":"done"}']
    manifest = process_manifest(SCRIPT + lines)
    manifest["tasks"] = {"max_usage_models": 2}
    door = create_app(manifest, listen="127.0.0.1:41873")
    try:
        task = Rpc(door).result("SendMessage", send_params("go"))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        usage = door.session.store.get(task["id"]).usage
        assert usage.models == ["a", "b"]
        assert usage.totals.input_tokens == 6
    finally:
        door.close()
