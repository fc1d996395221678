"""A run survives its Redis stopped and restarted: events it could not store are kept and
written in order when Redis answers again; the agent never sees the outage."""
from __future__ import annotations

import pytest
import redis

from murmur_wsgi.hub import create_hub
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
        for event in STEPS.values():
            event.set()
        close_hub(hub)
        if restarted is not None:
            restarted.stop()
        try:
            server.stop()
        except redis.RedisError:
            pass
