"""A task of text alone is written without the encoder: the same bytes as the encoder's."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from murmur_wsgi.door.tasks.record import ALL_STATES, TaskRecord
from murmur_wsgi.wire import task as wire_task

_dumps = json.JSONEncoder(separators=(",", ":")).encode
TEXT = st.text(max_size=40) | st.sampled_from(['', '"', '\\', '\x00\x1f', 'é\u2028', '\ud800'])
MAYBE = st.none() | TEXT


@settings(max_examples=300, deadline=None)
@given(state=st.sampled_from(sorted(ALL_STATES)), context_id=TEXT, status_text=MAYBE,
       response=MAYBE, prompt=MAYBE, changed_ms=st.integers(0, 4_102_444_800_000))
def test_a_text_task_reads_as_the_encoder_writes_it(state, context_id, status_text, response,
                                                    prompt, changed_ms):
    record = TaskRecord("tsk_" + "a" * 32, context_id)
    record.state, record.status_text, record.changed_ms = state, status_text, changed_ms
    record.response, record.prompt = response, prompt
    for artifacts in (True, False):
        expected = _dumps(record.to_dict(artifacts))
        assert record.to_json(artifacts, cache=False) == expected
        record.touch()
        assert record.to_json(artifacts) == expected


def test_the_builder_writes_the_dicts_of_the_shapes():
    message = wire_task.agent_message("msg_tsk_1_status", "ctx_1", "tsk_1", "done \"now\"")
    artifact = wire_task.artifact("response", [wire_task.text_part("hé")])
    full = wire_task.task("tsk_1", "ctx_1", wire_task.status(wire_task.COMPLETED, "ts", message),
                          [artifact])
    assert wire_task.text_task_json("tsk_1", "ctx_1", wire_task.COMPLETED, "ts", "done \"now\"",
                                    ("response", "hé")) == _dumps(full)
    bare = wire_task.task("tsk_1", "ctx_1", wire_task.status(wire_task.WORKING, "ts"))
    assert wire_task.text_task_json("tsk_1", "ctx_1", wire_task.WORKING, "ts") == _dumps(bare)


def test_a_task_with_more_than_text_goes_through_the_encoder():
    record = TaskRecord("tsk_" + "b" * 32, "ctx_b")
    record.state, record.status_text = wire_task.CANCELED, "task canceled"
    record.residue = [{"kind": "detached_shell", "work_id": "wrk_1"}]
    record.running = [{"workId": "wrk_1", "binary": "/bin/sleep", "command": "sleep 9",
                       "runningMs": 5}]
    record.agent_artifacts = {"art": wire_task.artifact("art", [wire_task.data_part({"k": [1]})])}
    text = record.to_json(cache=False)
    assert text == _dumps(record.to_dict())
    assert '"runningCommands"' in text and '"residue"' in text and '"art"' in text
