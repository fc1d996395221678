"""A task as a client builds it from the task's stream, and as GetTask tells it: for the
property tests that compare the two (a2a-sdk's task manager folds a stream the same way)."""
from __future__ import annotations

from tests.hub.conftest import sse_events

FINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
         "TASK_STATE_REJECTED"}


def read_stream(response) -> list:
    """A stream's results, read whole; the response closed (as a WSGI server closes it:
    a SubscribeToTask gives its tenant's slot back then)."""
    try:
        return [event["result"] for event in sse_events(response)]
    finally:
        response.close()


def fold(events: list, task_id: str) -> dict:
    """The task a client builds from a task's stream (each event: a JSON-RPC result)."""
    task = None
    for at, event in enumerate(events):
        assert list(event) in (["task"], ["statusUpdate"], ["artifactUpdate"]), event
        (kind, body), = event.items()
        final = kind != "artifactUpdate" and body["status"]["state"] in FINAL
        assert final == (at == len(events) - 1) or kind == "task", (at, events)
        if kind == "task":
            assert task is None and body["id"] == task_id
            task = {"status": body["status"], "artifacts": list(body.get("artifacts", []))}
            continue
        assert task is not None and body["taskId"] == task_id
        if kind == "statusUpdate":
            task["status"] = body["status"]
            continue
        artifact, found = body["artifact"], None
        for i, held in enumerate(task["artifacts"]):
            if held["artifactId"] == artifact["artifactId"]:
                found = i
        if found is None:
            task["artifacts"].append(dict(artifact, parts=list(artifact["parts"])))
        elif body.get("append"):
            held = task["artifacts"][found]
            task["artifacts"][found] = dict(held, parts=held["parts"] + artifact["parts"])
        else:
            task["artifacts"][found] = dict(artifact, parts=list(artifact["parts"]))
    assert task is not None
    return told(task)


def told(task: dict) -> dict:
    """What a task tells: its state, its status message's parts, its artifacts (a run of
    text parts of one media type read as one text)."""
    artifacts = []
    for artifact in task.get("artifacts", []):
        parts = []
        for part in artifact["parts"]:
            if parts and set(part) == set(parts[-1]) == {"text", "mediaType"} and \
                    part["mediaType"] == parts[-1]["mediaType"]:
                parts[-1] = dict(parts[-1], text=parts[-1]["text"] + part["text"])
            else:
                parts.append(part)
        artifacts.append(dict(artifact, parts=parts))
    message = task["status"].get("message")
    return {"state": task["status"]["state"], "message": message and message["parts"],
            "artifacts": {artifact["artifactId"]: artifact for artifact in artifacts}}
