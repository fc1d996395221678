"""The stale sweep's age rule on Redis: a run older than ``sweep_max_age_secs`` ends FAILED,
and that age is never below the run timeout + 60 s of any tenant ("a background run lives
until the run timeout"), a tenant's own ``limits.run_timeout_secs`` included."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.redis_keys import member, runs_key

from tests.hub.agents import gate
from tests.hub.conftest import HubClient, close_hub, hub_config, wait_until

pytestmark = pytest.mark.cluster          # on a Redis Cluster too

LONG_RUNS = 600                           # acme's run timeout; the hub's own is 30 s


@pytest.fixture
def hub(redis_server):
    redis_server.flush()
    config = hub_config(store=redis_server.url)
    config["tenants"]["acme"]["limits"] = {"run_timeout_secs": LONG_RUNS}
    h = create_hub(config)
    yield h
    close_hub(h)


def _started_secs_ago(hub, task_id: str, seconds: float) -> None:
    """Move the run's start in its replica's runs ``seconds`` into the past (what the sweep
    reads its age from)."""
    store = hub.store
    key, name = runs_key(store.replica), member("acme", task_id)
    started = store._redis.zscore(key, name)
    assert started is not None
    store._redis.zadd(key, {name: started - seconds * 1000})


def _state(rpc, task_id) -> str:
    return rpc.result("GetTask", {"id": task_id})["status"]["state"]


def test_a_run_within_its_tenants_run_timeout_is_not_swept(hub):
    # NOTE: before, the floor read the top-level run timeout only (30 s: the age was
    # max(300, 90) = 300 s): this run, 400 s into the 600 s its tenant allows, ended FAILED
    # "interrupted" by its own replica's sweep.
    rpc = HubClient(hub, "held")
    task = rpc.send("g-long", configuration={"returnImmediately": True})
    wait_until(lambda: _state(rpc, task["id"]) == "TASK_STATE_WORKING")
    _started_secs_ago(hub, task["id"], 400)
    hub.replica._sweep()
    assert _state(rpc, task["id"]) == "TASK_STATE_WORKING"
    _started_secs_ago(hub, task["id"], 300)         # 700 s: past its run timeout + 60 s
    hub.replica._sweep()
    done = rpc.result("GetTask", {"id": task["id"]})["status"]
    assert done["state"] == "TASK_STATE_FAILED"
    assert done["message"]["parts"][0]["text"].startswith("interrupted")
    gate("g-long").set()
