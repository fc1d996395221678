"""What the hub's Sentinel tests share: a hub of a set's URL across a failover the
sentinels call, and a hub whose every call answers the store's -32603.
"""
from __future__ import annotations

from murmur_wsgi.hub import create_hub
from tests.hub.conftest import HubClient, close_hub, hub_config, send_params, wait_until

UNAVAILABLE = {"code": -32603, "message": "Internal error: the hub's task store is "
                                          "unavailable; try again shortly"}


def serves_across_a_failover(sentinel_set, settings: dict) -> None:
    """A hub of ``sentinel_set``'s URL serves before its primary's SIGKILL and after the
    sentinels promote the replica (the old one back as its replica): a SendMessage
    completes, and the task written before reads back."""
    hub = create_hub(hub_config(store=sentinel_set.url, redis=dict(settings)))
    try:
        rpc = HubClient(hub)
        before = rpc.send("before the failover")
        assert before["status"]["state"] == "TASK_STATE_COMPLETED"
        sentinel_set.kill_primary()
        sentinel_set.wait_failover()
        sentinel_set.rejoin()
        answers = []     # -32603 until a connection reaches the new primary

        def served() -> bool:
            answers.append(rpc.call("SendMessage", send_params("after")).get_json())
            return "result" in answers[-1]
        wait_until(served)
        assert answers[-1]["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert rpc.result("GetTask", {"id": before["id"]})["id"] == before["id"]
    finally:
        close_hub(hub)


def answers_unavailable(url: str, settings: dict) -> None:
    """Every call of a hub of ``url`` answers the store's -32603 (a 200)."""
    hub = create_hub(hub_config(store=url, redis=dict(settings)))
    try:
        rpc = HubClient(hub)
        answer = rpc.call("SendMessage", send_params("hi"))
        assert answer.status_code == 200 and answer.get_json()["error"] == UNAVAILABLE
        assert rpc.error("GetTask", {"id": "t-absent"}) == UNAVAILABLE
    finally:
        close_hub(hub)
