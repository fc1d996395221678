"""examples/report_agent.py under a real ``gunicorn -k gevent``, driven by the a2a-sdk client.

A data part in; two named artifacts out (``summary`` streamed in chunks,
``report.csv`` a file part); a custom final status message; a rejection.
Every event is the SDK's own strict parse. The usage the agent reports stays
off the wire: tests/door/test_example_report.py reads it on the task record.
"""
from __future__ import annotations

import asyncio
import uuid

import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf import json_format, struct_pb2

from tests.e2e.conftest import default_manifest, start_door
from tests.e2e.door.test_interop_sdk import WAIT, collect, kind, sdk

pytestmark = pytest.mark.e2e

ROWS = [{"city": "Oslo", "temp": 4}, {"city": "Lima", "temp": 19}, {"city": "Pune", "temp": 31}]
CSV = b"city,temp\nOslo,4\nLima,19\nPune,31\n"
S = TaskState


def table_message(rows=ROWS) -> SendMessageRequest:
    value = json_format.ParseDict({"rows": rows}, struct_pb2.Value())
    return SendMessageRequest(message=Message(
        message_id=f"msg-{uuid.uuid4().hex}", role=Role.ROLE_USER,
        parts=[Part(text="report this table"), Part(data=value, media_type="application/json")]))


@pytest.fixture(scope="module")
def report_door(tmp_path_factory):
    manifest = dict(default_manifest(), agent="examples.report_agent:agent")
    with start_door(tmp_path_factory, manifest) as door:
        yield door


def test_streamed_and_file_artifacts_and_the_status_message(report_door):
    async def scenario():
        async with sdk(report_door, streaming=True) as client:
            return await collect(client.send_message(table_message()))

    events = asyncio.run(asyncio.wait_for(scenario(), WAIT))
    updates = [e.artifact_update for e in events if kind(e) == "artifact_update"]
    summary = [u for u in updates if u.artifact.artifact_id == "summary"]
    # One chunk per row, appended after the first; then the empty last chunk.
    assert [(u.append, u.last_chunk) for u in summary] == [
        (False, False), (True, False), (True, False), (True, True)]
    assert summary[0].artifact.description == "one line per row"
    assert "".join(p.text for u in summary for p in u.artifact.parts) == (
        "row 1: city=Oslo, temp=4\nrow 2: city=Lima, temp=19\nrow 3: city=Pune, temp=31\n")
    (report,) = [u for u in updates if u.artifact.artifact_id == "report.csv"]
    assert report.last_chunk and not report.append
    (part,) = report.artifact.parts
    assert (part.raw, part.media_type, part.filename) == (CSV, "text/csv", "report.csv")
    assert report.artifact.metadata["rows"] == 3
    # No response artifact: the agent returned Completed without text.
    assert [u.artifact.artifact_id for u in updates] == ["summary"] * 4 + ["report.csv"]
    final = events[-1].status_update.status
    assert final.state == S.TASK_STATE_COMPLETED
    assert final.message.parts[0].text == "reported 3 rows in 2 columns"


def test_the_blocking_answer_holds_both_artifacts_whole(report_door):
    async def scenario():
        async with sdk(report_door) as client:
            return await collect(client.send_message(table_message()))

    (event,) = asyncio.run(asyncio.wait_for(scenario(), WAIT))
    task = event.task
    assert task.status.state == S.TASK_STATE_COMPLETED
    assert task.status.message.parts[0].text == "reported 3 rows in 2 columns"
    assert [a.artifact_id for a in task.artifacts] == ["summary", "report.csv"]
    assert [p.text for p in task.artifacts[0].parts] == [
        "row 1: city=Oslo, temp=4\n", "row 2: city=Lima, temp=19\n",
        "row 3: city=Pune, temp=31\n"]
    assert task.artifacts[1].parts[0].raw == CSV


@pytest.mark.parametrize("request_, reason", [
    (SendMessageRequest(message=Message(message_id="m-text", role=Role.ROLE_USER,
                                        parts=[Part(text="no table here")])),
     'send a data part {"rows": [...]}: this agent reads tables only'),
    (table_message([{"city": "Oslo"}, 7]), "row 2 is not an object"),
], ids=["no-table", "bad-row"])
def test_a_message_without_a_table_is_rejected(report_door, request_, reason):
    async def scenario():
        async with sdk(report_door) as client:
            return await collect(client.send_message(request_))

    (event,) = asyncio.run(asyncio.wait_for(scenario(), WAIT))
    assert event.task.status.state == S.TASK_STATE_REJECTED
    assert event.task.status.message.parts[0].text == reason
    assert not event.task.artifacts
