"""An artifact stream's ``last`` is held to its type as ``write(final=)`` is:
``out.write(part, last="yes")`` published ``"lastChunk":"yes"`` (and ``1``:
``"lastChunk":1``), which no A2A reader takes (TaskArtifactUpdateEvent.last_chunk is a
bool)."""
from __future__ import annotations

import pytest

from murmur_wsgi import create_app

from tests.agents_util import events_of, response_of, tmp_home
from tests.conftest import Rpc
from tests.tasks_util import send_params


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


@pytest.mark.parametrize("last", ["yes", 1, None, 0.0])
def test_an_artifact_chunks_last_of_another_type_is_refused_in_the_call(last):
    def agent(ctx):
        out = ctx.artifacts.stream("out")
        try:
            out.write("a", last=last)
        except TypeError as ex:
            return f"refused: {type(ex).__name__}"
        return "written"

    door = create_app({"name": "chunks", "version": "0.1.0"}, agent=agent)
    try:
        task = Rpc(door).result("SendMessage", send_params("go"))["task"]
        assert response_of(task) == "refused: AgentValueError"
        for event in events_of(door, task["id"]):
            if "artifactUpdate" in event:
                assert type(event["artifactUpdate"].get("lastChunk", False)) is bool, event
    finally:
        door.close()
