"""examples/report_agent.py in-process: the usage it reports is on the task record only."""
from __future__ import annotations

import json

import pytest

from examples.report_agent import MODEL, make_app
from tests.agents_util import tmp_home
from tests.conftest import Rpc

ROWS = [{"city": "Oslo", "temp": 4}, {"city": "Lima", "temp": 19}]
CSV = "city,temp\nOslo,4\nLima,19\n"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


def test_reported_usage_is_on_the_task_record_not_on_the_wire():
    rpc = Rpc(make_app())
    try:
        params = {"message": {"messageId": "m-1", "role": "ROLE_USER",
                              "parts": [{"data": {"rows": ROWS}}]}}
        task = rpc.result("SendMessage", params)["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert [a["artifactId"] for a in task["artifacts"]] == ["summary", "report.csv"]
        assert task["artifacts"][1]["metadata"] == {"rows": 2, "inReplyTo": "m-1"}
        usage = rpc.door.session.store.get(task["id"]).usage
        assert usage.top_model == MODEL
        counts = {"input_tokens": len(json.dumps(ROWS)), "output_tokens": len(CSV),
                  "cached_tokens": 0}
        assert usage.to_dict() == dict(counts, model=MODEL, by_model={MODEL: counts})
        wire = json.dumps(rpc.result("GetTask", {"id": task["id"]}))
        assert "tokens" not in wire and MODEL not in wire
    finally:
        rpc.door.close()
