"""An agent's trace record keeps the door's head (event_type, event_id, parent_id,
session_id, timestamp; docs/agents.md "Every line starts …"): a field of one of those names
is refused in the call. Written, Trace._write_dict let such a field replace the head's: the
record of "note" was written as a "task_end" (a record only the door writes), and one given
event_id="x" was written under "x" while the call returned another id, which names no
record of the trace."""
from __future__ import annotations

import pytest

from murmur_wsgi import create_app

from tests.agents_util import tmp_home
from tests.conftest import Rpc
from tests.agents_util import records_of
from tests.tasks_util import send_params


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


def test_an_agents_field_never_replaces_the_records_head():
    returned = []

    def agent(ctx):
        for field in ("event_type", "event_id", "parent_id", "session_id", "timestamp"):
            try:
                ctx.record_event("note", **{field: "x"}, exit_status="ok")
            except ValueError:
                continue
        returned.append(ctx.record_event("note", exit_status="ok"))
        return "recorded"

    door = create_app({"name": "notes", "version": "0.1.0"}, agent=agent,
                      listen="127.0.0.1:41873", trace=True)
    try:
        task = Rpc(door).result("SendMessage", send_params("go"))["task"]
        ends = records_of(door, "task_end")
        assert [r.get("task_id") for r in ends] == [task["id"]], ends     # the door's alone
        notes = records_of(door, "note")
        assert len(notes) == 1 and notes[0]["event_id"] == returned[0], notes
        assert notes[0]["session_id"] == door.session.id
    finally:
        door.close()
