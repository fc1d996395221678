"""An agent that uses the whole agent API: it turns a table into a report (docs/agents.md).

Send it a data part ``{"rows": [{"city": "Oslo", "temp": 4}, …]}``. It answers
with two named artifacts: ``summary``, streamed one line per row, and
``report.csv``, a file part; it reports the tokens it "used", and completes
with a status message of its own and no ``response``. A message without a
table, or with a row that is not an object, is rejected (TASK_STATE_REJECTED).

    python examples/report_agent.py                        # Werkzeug, port 41874
    gunicorn -k gevent -w 1 -b 127.0.0.1:41874 'examples.report_agent:make_app()'
    # or in murmur.yaml: agent: "examples.report_agent:agent"
    # or on the hub, under a tenant's agents in hub.yaml:
    #   report: {agent: "examples.report_agent:agent"}
"""
from __future__ import annotations

import csv
import io
import json

from murmur_wsgi import create_app
from murmur_wsgi.agents import Completed, DataPart, FilePart, TaskContext, TaskRejected

MANIFEST = {"name": "table-report", "version": "0.1.0"}
MODEL = "table-report-1"


def read_rows(ctx: TaskContext) -> list[dict]:
    """The rows of the message's first data part that holds a table; reject otherwise."""
    for part in ctx.message.parts:
        if isinstance(part, DataPart) and isinstance(part.data, dict) and "rows" in part.data:
            rows = part.data["rows"]
            if not isinstance(rows, list) or not rows:
                raise TaskRejected("rows must be a non-empty array of objects")
            for number, row in enumerate(rows, 1):
                if not isinstance(row, dict):
                    raise TaskRejected(f"row {number} is not an object")
            return rows
    raise TaskRejected('send a data part {"rows": [...]}: this agent reads tables only')


def cell(value) -> str:
    """A value as the report shows it (a protobuf client sends every number as a double)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return "" if value is None else str(value)


def agent(ctx: TaskContext) -> Completed:
    given = read_rows(ctx)
    rows = [{key: cell(value) for key, value in row.items()} for row in given]
    # NOTE: sorted: a data part's object is a protobuf Struct, whose keys have no order.
    columns = sorted({key for row in rows for key in row})

    # A streamed artifact: one artifactUpdate per line (append: true after the first),
    # and lastChunk: true when the block ends.
    with ctx.artifacts.stream("summary", description="one line per row") as out:
        for number, row in enumerate(rows, 1):
            out.write(f"row {number}: "
                      + ", ".join(f"{key}={row.get(key, '')}" for key in columns) + "\n")

    # A whole artifact holding a file part: bytes, with a media type and a file name.
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    table = buffer.getvalue()
    meta = {"rows": len(rows), "inReplyTo": ctx.message.message_id}
    if ctx.caller is not None:
        meta["requestedBy"] = ctx.caller
    ctx.artifacts.add("report.csv", FilePart(table.encode("utf-8"), "text/csv", "report.csv"),
                      metadata=meta)

    # What the run consumed: kept on the task record (the door does not send it).
    ctx.usage(input_tokens=len(json.dumps(given)), output_tokens=len(table), model=MODEL)
    return Completed(status_message=f"reported {len(rows)} rows in {len(columns)} columns")


def make_app():
    """The door serving ``agent``, built without any YAML."""
    return create_app(MANIFEST, agent=agent)


if __name__ == "__main__":
    from werkzeug.serving import run_simple

    run_simple("127.0.0.1", 41874, make_app(), threaded=True)
