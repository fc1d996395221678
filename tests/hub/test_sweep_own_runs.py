"""A replica's sweep and its own runs on Redis: they are in flight on the replica that
sweeps, whatever its liveness key says when the sweep reads it; only the age rule ends
them (``tests/hub/test_sweep_age.py``)."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.redis_keys import live_key

from tests.hub.agents import gate
from tests.hub.conftest import FAST, HubClient, close_hub, hub_config, wait_until

pytestmark = pytest.mark.cluster          # on a Redis Cluster too


def test_a_turn_that_outlasts_the_liveness_never_sweeps_its_own_replicas_runs(redis_server):
    """The turn's steps before its sweep take longer than ``redis.liveness_secs`` (0.3 s: a
    loaded machine, a step waiting on a cluster's stalled primary): the replica's key,
    renewed at the turn's start, has expired when its own sweep reads it. Before, that
    sweep took the replica for dead and ended its own live run FAILED ("interrupted"); the
    run goes on, and completes."""
    redis_server.flush()
    hub = create_hub(hub_config(store=redis_server.url, redis=dict(FAST)))
    client = HubClient(hub, "held")
    key = live_key(hub.store.replica)
    sweep, sweeps = hub.replica._sweep, []

    def late_sweep():
        if not sweeps:                  # the first: its key expired since the turn's beat
            wait_until(lambda: not hub.store._redis.exists(key), timeout=5)
        sweeps.append(True)
        sweep()

    state = lambda: client.result("GetTask", {"id": task["id"]})["status"]["state"]  # noqa: E731
    try:
        task = client.send("g-own-sweep", configuration={"returnImmediately": True})
        hub.replica._sweep = late_sweep
        wait_until(lambda: len(sweeps) >= 3)
        assert (state(), hub.runs.get(task["id"]) is not None) == ("TASK_STATE_WORKING", True)
        gate("g-own-sweep").set()
        wait_until(lambda: state() == "TASK_STATE_COMPLETED")
    finally:
        close_hub(hub)
