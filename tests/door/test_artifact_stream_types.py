"""An artifact stream's ``last`` is held to its type as ``write(final=)`` is:
``out.write(part, last="yes")`` published ``"lastChunk":"yes"`` (and ``1``:
``"lastChunk":1``), which no A2A reader takes (TaskArtifactUpdateEvent.last_chunk is a
bool)."""
from __future__ import annotations

import pytest


from tests.agents_util import events_of, one_task, response_of, tmp_home, tried


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


@pytest.mark.parametrize("last", ["yes", 1, None, 0.0])
def test_an_artifact_chunks_last_of_another_type_is_refused_in_the_call(last):
    agent = tried(lambda ctx: ctx.artifacts.stream("out").write("a", last=last), TypeError)
    with one_task(agent, "chunks") as (door, task):
        assert response_of(task) == "refused: AgentValueError"
        for event in events_of(door, task["id"]):
            if "artifactUpdate" in event:
                assert type(event["artifactUpdate"].get("lastChunk", False)) is bool, event
