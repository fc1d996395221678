"""The hub's event texts written without the encoder are the encoder's texts, exactly."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.task import (COMPLETED, FAILED, artifact_event, artifact_event_around,
                                  final_texts, status_update, task_status)
from murmur_wsgi.wire import task as wire_task
from murmur_wsgi.wire.encode import compact_utf8

CONTEXTS = ["ctx-1", 'a "quoted" \\ context', "héllo ✓ \U0001f600", "line\nbreak\u2028", ""]


@pytest.mark.parametrize("context_id", CONTEXTS)
@pytest.mark.parametrize("text", [None, 'it "failed"\n', "ünïcode"])
def test_final_texts_are_the_status_update_and_the_task_s_head(context_id, text):
    task_id = "0f1e2d3c-4b5a-4697-8877-665544332211"
    status = task_status(task_id, context_id, FAILED if text else COMPLETED, text,
                         1_764_600_000_123)
    final, head = final_texts(task_id, context_id, status)
    assert final == status_update(task_id, context_id, status)
    assert head + "}" == compact_utf8(wire_task.task(task_id, context_id, status))


@pytest.mark.parametrize("context_id", CONTEXTS)
@pytest.mark.parametrize("append", [False, True])
@pytest.mark.parametrize("last", [False, True])
def test_an_artifact_event_around_its_encoded_artifact_is_the_artifact_event(context_id,
                                                                           append, last):
    artifact = {"artifactId": "answer", "name": "answer",
                "parts": [{"text": 'x "y" ✓', "mediaType": "text/plain"}]}
    head, middle, tail = artifact_event_around("t-1", context_id, compact_utf8(artifact),
                                               append, last)
    assert middle == compact_utf8(artifact)
    assert head + middle + tail == artifact_event("t-1", context_id, artifact, append, last)
