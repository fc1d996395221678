"""One unreadable record on Redis (written there by hand, an old release, a bad restore)
costs at most its own task: the sweep of a dead replica's runs goes on."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.store.redis_keys import events_key, member, runs_key

from tests.hub.conftest import wait_until

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too


def _state(rpc, task_id):
    return rpc.result("GetTask", {"id": task_id})["status"]["state"]


def test_an_event_without_its_payload_does_not_stop_the_sweep(pair):
    a, b = pair
    a.agent = b.agent = "stubborn"
    task = a.send("g-bad-log", configuration={"returnImmediately": True})
    wait_until(lambda: _state(b, task["id"]) == "TASK_STATE_WORKING")
    # A run of A listed first, whose log holds an entry without its payload ``p``.
    r = a.hub.store._redis
    r.zadd(runs_key(a.hub.store.replica), {member("acme", "bad-log"): 0})
    r.xadd(events_key("acme", "bad-log"), {"x": "1"}, id="1-1")
    a.hub.replica.stop()                # A vanishes: B's sweep ends its runs FAILED
    r.delete(f"murmur:{{hub}}:replica:{a.hub.store.replica}")
    wait_until(lambda: _state(b, task["id"]) == "TASK_STATE_FAILED")

