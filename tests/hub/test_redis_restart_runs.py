"""A run survives its Redis stopped and restarted: events it could not store are kept and
written in order when Redis answers again; the agent never sees the outage."""
from __future__ import annotations

import json
import uuid

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.context import Caller, HubContext
from murmur_wsgi.hub.runs import Run
from murmur_wsgi.hub.task import HubTask
from murmur_wsgi.wire.message_hub import stored_message
from tests.hub import restart_agents
from tests.hub.conftest import FAST, HubClient, agent, close_hub, hub_config, sse_events
from tests.redis_util import RedisServer

STEPS = restart_agents.STEPS
DEADLINE = 10.0


@pytest.fixture
def server(tmp_path):
    server = RedisServer(tmp_path / "redis", persist=True).start()
    yield server
    server.stop()


def _close(hub, restarted) -> None:
    """Let the agent finish, close the hub, stop the restarted Redis (the fixture stops
    the first)."""
    for event in STEPS.values():
        event.set()
    close_hub(hub)
    if restarted is not None:
        restarted.stop()


def _reached(step: str) -> None:
    assert STEPS[step].wait(DEADLINE), f"the agent did not reach {step!r}"


def _state(rpc, task_id):
    payload = rpc.call("GetTask", {"id": task_id}).get_json()
    return payload.get("result", {}).get("status", {}).get("state")


def test_progress_artifacts_and_tokens_written_while_redis_is_away_are_kept_in_order(
        server, tmp_path):
    restart_agents.reset()
    config = hub_config(store=server.url, redis=dict(FAST))
    config["tenants"]["acme"]["agents"]["reporter"] = agent("tests.hub.restart_agents:reporter")
    hub = create_hub(config)
    restarted = None
    try:
        rpc = HubClient(hub, "reporter")
        task = rpc.send("go", configuration={"returnImmediately": True})
        _reached("reported")
        server.stop()
        STEPS["down"].set()
        _reached("reported_down")                    # progress, artifact, token: none raised
        assert restart_agents.RAISED == []
        assert hub.runs.get(task["id"]).kept.events   # kept, not lost
        restarted = RedisServer(tmp_path / "redis", port=server.port, persist=True).start()
        STEPS["back"].set()
        probe = HubClient(hub, "reporter")
        deadline_ok = hub.runs.wait(lambda: hub.runs.get(task["id"]) is None, DEADLINE)
        assert deadline_ok, "the run did not end"
        assert restart_agents.RAISED == []
        assert _state(probe, task["id"]) == "TASK_STATE_COMPLETED"
        events = [e["result"] for e in sse_events(probe.call("SubscribeToTask",
                                                             {"id": task["id"]}))]
        seen = []
        for event in events:
            if "statusUpdate" in event:
                status = event["statusUpdate"]["status"]
                message = status.get("message")
                seen.append(("status", status["state"],
                             message["parts"][0]["text"] if message else None))
            elif "artifactUpdate" in event:
                artifact = event["artifactUpdate"]["artifact"]
                seen.append(("artifact", artifact["artifactId"],
                             artifact["parts"][0].get("text")))
        progress = [s[2] for s in seen if s[0] == "status" and s[2] and s[2].startswith("step")]
        notes = [s[1] for s in seen if s[0] == "artifact" and s[1].startswith("notes-")]
        assert progress == ["step 1", "step 2", "step 3"]
        assert notes == ["notes-1", "notes-2", "notes-3"]
        order = [s for s in seen if s[0] == "artifact" and s[1].startswith("notes-")
                 or s[0] == "status" and s[2] and s[2].startswith("step")]
        assert [s[2] if s[0] == "status" else s[1] for s in order] == [
            "step 1", "notes-1", "step 2", "notes-2", "step 3", "notes-3"]
        answer = ""                  # rebuilt as a client applying ``append`` would
        for event in events:
            update = event.get("artifactUpdate")
            if update is not None and update["artifact"]["artifactId"] == "answer":
                text = "".join(p.get("text", "") for p in update["artifact"]["parts"])
                answer = answer + text if update["append"] else text
        assert answer == "token 1 token 2 token 3 "
        assert seen[-1][:2] == ("status", "TASK_STATE_COMPLETED")
    finally:
        _close(hub, restarted)


def test_a_run_whose_start_cannot_be_stored_runs_and_its_start_is_written_first(
        server, tmp_path):
    """Redis goes away between the task's creation and its run's start: the agent runs
    anyway, and the start (WORKING) is stored before every later event."""
    restart_agents.reset()
    hub = create_hub(hub_config(store=server.url, redis=dict(FAST)))
    restarted = None
    try:
        task_id, context_id = str(uuid.uuid4()), str(uuid.uuid4())
        message = {"messageId": f"m-{task_id}", "role": "ROLE_USER", "parts": [{"text": "go"}]}
        task = HubTask(task_id, context_id, "acme", "reporter", message["messageId"],
                       stored_message(message, task_id, context_id))
        hub.store.create(task, task.task_event())
        run = Run(hub.runs, task, restart_agents.reporter, hub.limits("acme"), False)
        hub.runs.add(run)
        server.stop()                                   # the start cannot be stored
        STEPS["down"].set()
        run.start(HubContext(run, "go", [], task.history[0],
                             Caller("acme", "api-key", "reporter"), []))
        _reached("reported_down")
        assert restart_agents.RAISED == [] and run.kept.unstarted
        restarted = RedisServer(tmp_path / "redis", port=server.port, persist=True).start()
        STEPS["back"].set()
        assert hub.runs.wait(lambda: hub.runs.get(task_id) is None, DEADLINE)
        assert restart_agents.RAISED == []
        events = [json.loads(e.payload) for e in hub.store.events(task_id, 0, 0)[0]]
        states = [e["statusUpdate"]["status"]["state"] for e in events if "statusUpdate" in e]
        assert "task" in events[0] and states[0] == "TASK_STATE_WORKING"
        assert states[-1] == "TASK_STATE_COMPLETED"
        texts = [e["statusUpdate"]["status"]["message"]["parts"][0]["text"] for e in events
                 if "statusUpdate" in e and e["statusUpdate"]["status"].get("message")
                 and e["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"]
        assert texts == ["step 1", "step 2", "step 3"]
    finally:
        _close(hub, restarted)
