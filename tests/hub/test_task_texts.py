"""The hub's event texts written without the encoder are the encoder's texts, exactly."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.run_text import Carried, joined, made_of
from murmur_wsgi.hub.task import (ALL_STATES, COMPLETED, FAILED, SUBMITTED, WORKING, HubTask,
                                  answer_artifact, answer_json, artifact_event,
                                  artifact_event_around, artifact_update, data_part,
                                  final_texts, started_event, status_json, status_update,
                                  task_status)
from murmur_wsgi.hub.usage import usage_part, usage_part_json
from murmur_wsgi.wire import task as wire_task
from murmur_wsgi.wire.encode import compact_utf8

CONTEXTS = ["ctx-1", 'a "quoted" \\ context', "héllo ✓ \U0001f600", "line\nbreak\u2028", ""]


@pytest.mark.parametrize("context_id", CONTEXTS)
@pytest.mark.parametrize("text", [None, 'it "failed"\n', "ünïcode"])
def test_final_texts_are_the_status_update_and_the_task_s_head(context_id, text):
    task_id = "0f1e2d3c-4b5a-4697-8877-665544332211"
    state = FAILED if text else COMPLETED
    status = task_status(task_id, context_id, state, text, 1_764_600_000_123)
    final, head = final_texts(task_id, context_id, state, text, 1_764_600_000_123)
    assert final == status_update(task_id, context_id, status)
    assert head + "}" == compact_utf8(wire_task.task(task_id, context_id, status))


@pytest.mark.parametrize("context_id", CONTEXTS)
@pytest.mark.parametrize("state", sorted(ALL_STATES) + ['a "state"\n'])
@pytest.mark.parametrize("text", [None, 'it "failed"\n'])
def test_a_status_and_a_start_written_without_the_encoder_are_the_encoder_s(context_id,
                                                                           state, text):
    ms = 1_764_600_000_007
    status = task_status("t-1", context_id, state, text, ms)
    assert status_json("t-1", context_id, state, text, ms) == compact_utf8(status)
    assert started_event("t-1", context_id, ms) == status_update(
        "t-1", context_id, task_status("t-1", context_id, WORKING, None, ms))


@pytest.mark.parametrize("context_id", CONTEXTS)
@pytest.mark.parametrize("text", [None, "ünï \"x\""])
def test_a_task_s_wire_form_in_pieces_is_the_encoder_s(context_id, text):
    """``to_json``, cached or not, and a frozen task's form: the encoder's text of
    ``to_dict``, with its history encoded once for both (``history_json``)."""
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "é \u2028"}]}
    for artifacts in ([], [{"artifactId": "answer", "name": "answer", "parts": []}]):
        task = HubTask("t-1", context_id, "tenant", "agent", "m-1", message)
        task.set_state(SUBMITTED if text is None else FAILED, text)
        task.set_artifacts(artifacts)
        whole = compact_utf8(task.to_dict())
        assert task.to_json(cache=False) == whole and task.to_json() == whole
        assert task.history_json() == compact_utf8([message])
        task.freeze()
        assert task.to_json() == whole and task.history_json() == compact_utf8([message])


@pytest.mark.parametrize("named", [0, 1, 2])
def test_a_task_frozen_around_its_last_artifact_s_json_is_the_encoder_s(named):
    """``freeze(last)``: the last artifact's JSON as given (``TaskStore.end``'s ``answer``),
    the others encoded: the same text as a task frozen without it."""
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "é"}]}
    artifacts = [{"artifactId": f"n{i}", "name": "n", "parts": [{"text": f"{i} \"q\""}]}
                 for i in range(named)]
    artifacts.append(answer_artifact([wire_task.text_part('a "long"\n answer ✓')]))
    task = HubTask("t-1", "c", "tenant", "agent", "m-1", message)
    task.set_state(COMPLETED)
    task.set_artifacts(artifacts)
    whole, bare = compact_utf8(task.to_dict()), compact_utf8(task.to_dict(artifacts=False))
    task.freeze(compact_utf8(artifacts[-1]))
    assert task.to_json() == whole and task.to_json(artifacts=False) == bare
    assert task.artifacts == artifacts and task.history == [message]


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


@pytest.mark.parametrize("text", ["", "hi", 'a "quoted"\n\u2028 ✓ \U0001f600'])
@pytest.mark.parametrize("data", [None, {"a": [1, 2.5, None, "é"]}, "x", 0])
def test_an_answer_written_around_its_text_is_the_encoder_s(text, data):
    usage, usage_json = usage_part_json(None, {"m": {"input": 1, "output": 2, "cached": None}})
    assert usage == usage_part(None, {}) and usage_json == compact_utf8(usage)
    parts = [wire_task.text_part(text)] + ([] if data is None else [data_part(data)]) + \
        [data_part(usage)]
    assert answer_json(text, None if data is None else compact_utf8(data), usage_json) == \
        compact_utf8(answer_artifact(parts))


def test_the_usage_part_of_a_run_that_reported_nothing_is_each_task_s_own():
    # The memory store keeps the part's value in the task: one task's never another's.
    first, first_json = usage_part_json(None, {})
    second, _ = usage_part_json(None, {})
    first["usage"]["input_tokens"] = 7
    assert second == usage_part(None, {}) and second["usage"] is not first["usage"]
    assert usage_part_json(None, {}) == (usage_part(None, {}), first_json)


@pytest.mark.parametrize("context_id", CONTEXTS + ['"parts":[{"text":"x'])
@pytest.mark.parametrize("text", ["", "hi", 'a "q" \\ \n\t\x01 é \u2028 \ud800 \U0001f600',
                                  '"parts":[{"text":"x'])
def test_a_stored_piece_of_streamed_text_reads_back_from_its_event(context_id, text):
    """``run_text.Carried``: the run keeps a stored piece as its event; read back, it is the
    piece, whatever the ids and the text hold; ``made_of`` and ``joined`` read it so."""
    payload = artifact_update('t-"parts":[{"text":"', context_id, [wire_task.text_part(text)],
                              append=True, last=False)
    carried = Carried(payload, len(text))
    assert carried.text() == text and len(carried) == len(text)
    assert joined([carried, "tail"]) == text + "tail"
    assert made_of([carried, "tail"], text + "tail")
    assert not made_of([carried, "tail"], text + "tall")
