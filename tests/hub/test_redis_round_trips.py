"""What a message costs on Redis, counted by Redis itself (MONITOR): round trips per message.

A blocking SendMessage to an agent that answers at once is two round trips from the
hub: the OPEN script (the messageId's claim, admission, the task's creation and start)
and the END script, which frees the tenant's slot and returns the finished task the
answer is. A tenant with an admission hook pays one more: the claim, before its hook.
"""
from __future__ import annotations

import uuid

from murmur_wsgi.hub import create_hub

from tests.hub.conftest import KEY_B, HubClient, close_hub, hub_config, send_params

MARK = "round-trips-counted"


def _commands(redis_server, client, params) -> tuple[dict, list[str]]:
    """The answer to SendMessage ``params``, and every command a client (not a script)
    sent Redis meanwhile that names its message or its task."""
    watcher = redis_server.client()
    with watcher.monitor() as monitor:
        answer = client.result("SendMessage", params)
        redis_server.client().echo(MARK)
        seen = []
        while True:
            command = monitor.next_command()
            if command["client_type"] == "lua":
                continue
            if MARK in command["command"]:
                break
            seen.append(command["command"])
    task_id = answer["task"]["id"]
    message_id = params["message"]["messageId"]
    named = [c for c in seen if task_id in c or message_id in c]
    # NOTE: the replica's own turn (every second) may look at a run in flight: its cancel
    # mark and its state. Those are not the message's.
    return answer, [c for c in named if not c.startswith(("EXISTS", "HGET "))]


def test_a_blocking_send_message_is_two_round_trips(redis_server):
    redis_server.flush()
    hub = create_hub(hub_config(store=redis_server.url))
    try:
        client = HubClient(hub)
        assert client.send("warm")["status"]["state"] == "TASK_STATE_COMPLETED"
        answer, commands = _commands(redis_server, client,
                                     send_params("hi", message_id=str(uuid.uuid4())))
        assert answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert len(commands) == 2, commands
        assert all(c.startswith("EVALSHA") for c in commands), commands
        # The answer is the stored task, byte for byte what GetTask reads.
        stored = client.result("GetTask", {"id": answer["task"]["id"]})
        assert answer["task"] == stored
    finally:
        close_hub(hub)


def test_a_tenant_with_an_admission_hook_claims_first(redis_server):
    redis_server.flush()
    hub = create_hub(hub_config(store=redis_server.url))
    try:
        client = HubClient(hub, headers={"X-API-Key": KEY_B})      # globex: a hook
        answer, commands = _commands(redis_server, client,
                                     send_params("hi", message_id=str(uuid.uuid4())))
        assert answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert [c.split(" ", 1)[0] for c in commands] == ["SET", "EVALSHA", "EVALSHA"], \
            commands
    finally:
        close_hub(hub)
