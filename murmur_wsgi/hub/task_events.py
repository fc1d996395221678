"""A hub task's events and status as JSON texts: its statusUpdates, its artifactUpdates,
the answer artifact, and the texts a run's start and end write.

The hub's statusUpdate and artifactUpdate are the door's shapes (``wire/stream.py``) with
the hub's values: a status message's id is ``<task id>-status``, the answer is the
``answer`` artifact, and every text is UTF-8, unescaped. ``hub/task.py`` (the task and
its record) uses them and names them for its importers.
"""
from __future__ import annotations

import json

from murmur_wsgi.wire import stream as wire_stream
from murmur_wsgi.wire import task as wire_task
from murmur_wsgi.wire.encode import compact_utf8, utf8_string
from murmur_wsgi.wire.task import ALL_STATES, WORKING, now_ms, rfc3339

ANSWER = "answer"                # the answer artifact's id and name (docs/hub.md, "Methods")


def answer_artifact(parts: list) -> dict:
    return wire_task.artifact(ANSWER, parts)


def answer_json(text: str, data_json: str | None, usage_json: str) -> str:
    """``compact_utf8(answer_artifact(parts))`` of a COMPLETED answer's parts: its text, its
    data (``data_json``, encoded; None: none) and its usage part's value (``usage_json``).
    PERF: the answer's text escaped once, the rest written around it, in
    ``answer_artifact``'s, ``text_part``'s and ``data_part``'s order."""
    data = "" if data_json is None else f',{{"data":{data_json},"mediaType":"application/json"}}'
    return (f'{{"artifactId":"{ANSWER}","name":"{ANSWER}","parts":[{{"text":{utf8_string(text)},'
            f'"mediaType":"text/plain"}}{data},{{"data":{usage_json},'
            f'"mediaType":"application/json"}}]}}')


def artifacts_of(payloads) -> list:
    """The artifacts a task's logged events published, as a client folds them (an
    ``artifactUpdate`` with ``append`` adds its parts to the artifact of its id, else it is
    that artifact): the named ones in the order they came, ``answer`` last, as a run's end
    writes them. For an end written without its run (the stale sweep's)."""
    found: dict = {}
    for payload in payloads:
        try:
            update = json.loads(payload).get("artifactUpdate") if payload else None
        except (ValueError, AttributeError):
            update = None
        if not isinstance(update, dict) or not isinstance(update.get("artifact"), dict):
            continue
        artifact = update["artifact"]
        held = found.get(artifact.get("artifactId"))
        if held is not None and update.get("append"):
            # PERF: the list is this fold's own (made below): extended, not copied anew
            held["parts"].extend(artifact.get("parts", []))
        else:
            found[artifact.get("artifactId")] = dict(artifact,
                                                      parts=list(artifact.get("parts", [])))
    answer = found.pop(ANSWER, None)
    return list(found.values()) + ([answer] if answer is not None else [])


def status_json(task_id: str, context_id: str, state: str, text: str | None, ms: int) -> str:
    """``compact_utf8(task_status(…))``. PERF: a status without a message (a run's start, most
    ends) is written without the encoder: a state of ``wire.task``'s and a timestamp have
    nothing to escape."""
    if text is None and state in ALL_STATES:
        return f'{{"state":"{state}","timestamp":"{rfc3339(ms)}"}}'
    return compact_utf8(task_status(task_id, context_id, state, text, ms))


def task_status(task_id: str, context_id: str, state: str, text: str | None, ms: int) -> dict:
    """A task's TaskStatus: its state, ``text`` as the status message (``<id>-status``)."""
    message = None if text is None else wire_task.agent_message(f"{task_id}-status", context_id,
                                                                task_id, text)
    return wire_task.status(state, rfc3339(ms), message)


def progress_status(task_id: str, context_id: str, text: str) -> dict:
    """A WORKING status carrying ``text``, stamped now (an agent's progress)."""
    ms = now_ms()
    return wire_task.status(WORKING, rfc3339(ms), wire_task.agent_message(
        f"{task_id}-progress-{ms}", context_id, task_id, text))


def status_update(task_id: str, context_id: str, status: dict) -> str:
    return wire_stream.status_update(task_id, context_id, status, compact_utf8)


def artifact_update(task_id: str, context_id: str, parts: list, *, append: bool,
                    last: bool) -> str:
    """A chunk of the answer artifact."""
    return artifact_event(task_id, context_id, answer_artifact(parts), append, last)


def artifact_event(task_id: str, context_id: str, artifact: dict, append: bool,
                   last: bool) -> str:
    """An artifactUpdate of any artifact (an agent's own, or a chunk of one)."""
    return wire_stream.artifact_update(task_id, context_id, artifact, append, last, compact_utf8)


def artifact_event_around(task_id: str, context_id: str, artifact_json: str, append: bool,
                          last: bool) -> tuple[str, str, str]:
    """``artifact_event`` of an artifact already encoded, as the three texts it joins to
    (``artifact_json`` in the middle, not copied into a larger text). PERF: the texts
    around it are written without the encoder, in ``artifact_event``'s order."""
    return (f'{{"artifactUpdate":{{"taskId":{utf8_string(task_id)},"contextId":'
            f'{utf8_string(context_id)},"artifact":', artifact_json,
            f',"append":{_BOOL[append]},"lastChunk":{_BOOL[last]}}}}}')


_BOOL = {False: "false", True: "true"}


def ids_json(task_id: str, context_id: str) -> str:
    """What follows ``"id":`` (or ``"taskId":``) up to the status, in a Task and a statusUpdate."""
    return f'{utf8_string(task_id)},"contextId":{utf8_string(context_id)},"status":'


def final_texts(task_id: str, context_id: str, state: str, text: str | None,
                ms: int) -> tuple[str, str]:
    """``(status_update(task_id, context_id, task_status(…)), the Task's JSON with that
    status and nothing after it, its closing brace left out)``: what a task's end writes.
    PERF: the status is encoded once (``status_json``), the texts around it written without
    the encoder, in ``status_update``'s and ``wire.task.task``'s order."""
    ids = ids_json(task_id, context_id)
    encoded = status_json(task_id, context_id, state, text, ms)
    return f'{{"statusUpdate":{{"taskId":{ids}{encoded}}}}}', f'{{"id":{ids}{encoded}'


def started_event(task_id: str, context_id: str, ms: int) -> str:
    """The WORKING statusUpdate a run's start stores, stamped ``ms``: ``status_update`` of
    ``task_status(task_id, context_id, WORKING, None, ms)``, written as ``final_texts``
    writes it."""
    return f'{{"statusUpdate":{{"taskId":{ids_json(task_id, context_id)}' \
           f'{status_json(task_id, context_id, WORKING, None, ms)}}}}}'
