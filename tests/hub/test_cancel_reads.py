"""CancelTask of a run on another replica waits for the task's final event reading its
log from the newest event on, not from the start.

It read the whole log first, a page at a time: a run's log holds up to
``limits.max_output_bytes``, so each CancelTask from another replica (another worker of
the same hub) read all of it from Redis. 40 of them at once of a run that had streamed
60 MiB took 24 s of the workers' CPU and 9 s of Redis's, and 24 answered -32002 when the
task was canceled: they had not come to its end within cancel_timeout_secs.
"""
from __future__ import annotations

from murmur_wsgi.hub import create_hub

from tests.hub.conftest import FAST, HubClient, agent, close_hub, hub_config, wait_until

LOG_BYTES = 8 * 1024 * 1024


def _output_bytes(redis_server) -> int:
    return redis_server.client().info("stats")["total_net_output_bytes"]


def test_cancel_from_another_replica_reads_the_log_from_its_end(redis_server):
    redis_server.flush()
    config = hub_config(store=redis_server.url, redis=dict(FAST))
    config["tenants"]["acme"]["agents"]["reports"] = agent("tests.hub.agents:reports_then_holds")
    hubs = [create_hub(config) for _ in range(2)]
    try:
        a, b = (HubClient(h, "reports") for h in hubs)
        task = a.send(f"{LOG_BYTES // 4096} 4096", configuration={"returnImmediately": True})
        wait_until(lambda: a.hub.runs.get(task["id"]) is not None
                   and a.hub.runs.get(task["id"]).output.written > LOG_BYTES, timeout=30)
        before = _output_bytes(redis_server)
        canceled = b.result("CancelTask", {"id": task["id"]})
        read = _output_bytes(redis_server) - before
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        print(f"a CancelTask from B read {read} bytes of a {LOG_BYTES}-byte log")
        assert read < LOG_BYTES / 8, read           # the end of the log, not all of it
    finally:
        for h in hubs:
            close_hub(h)
