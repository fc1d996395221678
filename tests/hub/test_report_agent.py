"""examples/report_agent.py, the door's agent, hosted on the hub: checked at the wire.

The same callable runs on the door (tests/e2e/door/test_example_report.py): typed message
parts, ``ctx.artifacts.stream`` and ``add``, ``ctx.usage``, ``Completed`` with a
status message, ``TaskRejected``. What the hub adds: its ``answer`` artifact last,
holding the usage part (priced by ``pricing``), and ``ctx.caller`` is the tenant.
"""
from __future__ import annotations

import base64
import json

import pytest

from murmur_wsgi.hub import create_hub
from tests.hub.conftest import HubClient, agent, hub_config, send_params, sse_events

ROWS = [{"city": "Oslo", "temp": 4}, {"city": "Rome", "temp": 18}]
TABLE = "city,temp\nOslo,4\nRome,18\n"
IN, OUT = len(json.dumps(ROWS)), len(TABLE)      # what the agent reports (59 and 25)
# NOTE: 1 and 2 micro-credits a token (pricing is per million tokens).
USAGE = {"input_tokens": IN, "output_tokens": OUT, "credits": (IN + 2 * OUT) / 1_000_000,
         "credits_micros": IN + 2 * OUT, "pricing_status": "priced", "model": "table-report-1"}


def text(value: str) -> dict:
    return {"text": value, "mediaType": "text/plain"}


@pytest.fixture
def report():
    config = hub_config(pricing={"table-report-1": {"input": 1_000_000, "output": 2_000_000}})
    config["tenants"]["acme"]["agents"]["report"] = agent("examples.report_agent:agent")
    hub = create_hub(config)
    yield HubClient(hub, "report")
    hub.close(drain_timeout=5)


def table_params():
    return send_params("", parts=[{"text": "make a report"}, {"data": {"rows": ROWS}}])


def test_report_agent_completes_with_its_named_artifacts_and_the_usage_part(report):
    task = report.send("", parts=table_params()["message"]["parts"])
    status = task["status"]
    assert status["state"] == "TASK_STATE_COMPLETED"
    assert status["message"]["parts"] == [text("reported 2 rows in 2 columns")]
    assert [a["artifactId"] for a in task["artifacts"]] == ["summary", "report.csv", "answer"]
    summary, csv, answer = task["artifacts"]
    assert "".join(p["text"] for p in summary["parts"]) == \
        "row 1: city=Oslo, temp=4\nrow 2: city=Rome, temp=18\n"
    assert summary["description"] == "one line per row"
    assert csv["parts"] == [{"raw": base64.b64encode(TABLE.encode()).decode(),
                             "mediaType": "text/csv", "filename": "report.csv"}]
    assert csv["metadata"] == {"rows": 2, "inReplyTo": task["history"][0]["messageId"],
                               "requestedBy": "acme"}
    # Completed(text=None): the answer's text is empty; its usage part is last.
    assert answer["parts"] == [text(""), {"data": {"usage": USAGE}, "mediaType": "application/json"}]


def test_report_agent_streams_summary_chunks_then_the_answer(report):
    events = [e["result"] for e in sse_events(report.call("SendStreamingMessage",
                                                          table_params()))]
    updates = [(u["artifact"]["artifactId"], u["append"], u["lastChunk"])
               for u in (e["artifactUpdate"] for e in events if "artifactUpdate" in e)]
    assert updates == [("summary", False, False), ("summary", True, False),
                       ("summary", True, True), ("report.csv", False, True),
                       ("answer", False, True)]
    last_answer = events[-2]["artifactUpdate"]["artifact"]
    assert last_answer["parts"][-1] == {"data": {"usage": USAGE}, "mediaType": "application/json"}
    final = events[-1]["statusUpdate"]["status"]
    assert final["state"] == "TASK_STATE_COMPLETED"
    assert final["message"]["parts"] == [text("reported 2 rows in 2 columns")]


@pytest.mark.parametrize("parts, reason", [
    ([{"text": "no table here"}],
     'send a data part {"rows": [...]}: this agent reads tables only'),
    ([{"data": {"rows": [{"city": "Oslo"}, 3]}}], "row 2 is not an object"),
])
def test_report_agent_rejects_what_is_not_a_table(report, parts, reason):
    task = report.send("", parts=parts)
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert task["status"]["message"]["parts"] == [text(reason)]
    assert "artifacts" not in task
    got = report.result("GetTask", {"id": task["id"]})
    assert got["status"]["state"] == "TASK_STATE_REJECTED"

