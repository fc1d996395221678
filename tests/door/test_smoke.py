"""The door answers its card and a JSON-RPC request on Werkzeug's test client."""
from __future__ import annotations


def test_card_is_served(rpc):
    response = rpc.client.get("/.well-known/agent-card.json")
    assert response.status_code == 200
    assert response.get_json()["name"] == "test-agent"


def test_unknown_task_is_not_found(rpc):
    error = rpc.error("GetTask", {"id": "tsk_nope"})
    assert error == {"code": -32001, "message": "Task not found", "data": [{
        "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND",
        "domain": "a2a-protocol.org", "metadata": {"taskId": "tsk_nope"}}]}
