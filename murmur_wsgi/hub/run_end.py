"""How a run's ending becomes its task's end: the agent's ending as a final state, and
what the end writes (the answer's final chunk and artifacts).

Each is a run's (hub/runs.py), called with its lock held where said; they read and
write the run's fields as its own methods would.
"""
from __future__ import annotations

import logging

from murmur_wsgi.agents.endings import (NOT_JSON, AgentValueError, Ending, TaskCanceled,
                                        check_readable, run_agent)
from murmur_wsgi.agents.output import passed_text
from murmur_wsgi.hub.run_text import joined, made_of
from murmur_wsgi.hub.store import StoreError
from murmur_wsgi.hub.task import (CANCELED, COMPLETED, FAILED, answer_artifact, answer_json,
                                  artifact_event_around, artifact_update, data_part)
from murmur_wsgi.hub.usage import usage_part_json
from murmur_wsgi.wire.encode import compact_utf8 as _dumps
from murmur_wsgi.wire.task import text_part

logger = logging.getLogger("murmur_wsgi.hub.runs")

FAILED_PUBLIC = "the agent failed; the details are in the hub's log"


def final_write(run, state: str, answer: str | None, data) -> tuple[list, list | None,
                                                                   str | None]:
    """``(events, artifacts, encoded)`` the run's end writes (the run's lock held):
    COMPLETED's answer artifact and final chunk; CANCELED's and FAILED's named artifacts
    and streamed text kept."""
    events: list = []
    artifacts = encoded = None
    if state == COMPLETED:
        answer = answer if answer is not None else ""
        parts = [text_part(answer)]
        if data is not None:
            parts.append(data_part(data))
        usage, usage_json = usage_part_json(run.usage, run.runs.pricing)
        parts.append(data_part(usage))
        artifacts = [*run.artifacts.values(), answer_artifact(parts)]
        # PERF: a run that streamed nothing (an inline one, most) compares nothing
        if run.tokens and run.stored == len(run.tokens) and run.kept.idle \
                and made_of(run.tokens, answer):
            events.append(artifact_update(run.task_id, run.context_id, parts[1:],
                                          append=True, last=True))
        else:
            # NOTE: the chunk replaces the streamed text whole: its tokens can go.
            run.tokens, run.stored, run._loose = [], 0, 0
            # PERF: the answer encoded once, for its final chunk (a piece of its text,
            # never joined) and the task's artifacts (store.end's ``answer``), written
            # around its text (``answer_json``).
            encoded = answer_json(answer, None if data is None else _dumps(data), usage_json)
            events.append(artifact_event_around(run.task_id, run.context_id, encoded,
                                                append=False, last=True))
    elif state in (CANCELED, FAILED):
        # NOTE: what its stream published stays on the task: a client that read the stream
        # (or replays it) and one that reads the task see the same artifacts.
        streamed = joined(run.tokens)
        artifacts = [*run.artifacts.values()] + ([answer_artifact([text_part(streamed)])]
                                                 if streamed else [])
    return events, artifacts, encoded


def end_as(run, ending: Ending) -> None:
    """End the task as its agent's ending says (its call is over: ``Run.finish``'s
    ``returned``); a cancel asked for makes it CANCELED."""
    if ending.data is not None:
        try:
            check_readable(ending.data, "the answer")
        except AgentValueError as ex:
            ending = Ending(FAILED, NOT_JSON, error=ex)
    state, message, error = ending.state, ending.message, ending.error
    if ending.stopped:
        # NOTE: SystemExit, a killed greenlet: the task still ends, so nothing waits on it.
        logger.error("task %s: the agent was stopped", run.task_id, exc_info=error)
        run.finish(FAILED, FAILED_PUBLIC, returned=True)
        return
    if ending.bad_value:
        logger.error("task %s: the agent of %s/%s answered a value that is not JSON: %s",
                     run.task_id, run.tenant, run.agent_name, error)
    elif error is not None and message is None:
        if not run.stopping:
            logger.error("task %s: the agent of %s/%s failed", run.task_id, run.tenant,
                         run.agent_name, exc_info=error)
        message = FAILED_PUBLIC
    if run.cancel_requested:
        run.finish(CANCELED, None if state in (CANCELED, COMPLETED) else message,
                   returned=True)
    elif state != COMPLETED:
        run.finish(state, message, returned=True)
    else:
        try:
            run.finish(COMPLETED, answer=ending.text, data=ending.data,
                       status_message=message, returned=True)
        except Exception:  # noqa: BLE001 - whatever failed the answer, the task ends
            logger.exception("task %s: its answer could not be written", run.task_id)
            run.finish(FAILED, FAILED_PUBLIC, returned=True)


def execute(run, ctx, payload: str | None) -> Ending:
    """The run: its start stored (unless ``payload``, stored already), the agent's call,
    the task's end; the agent's ending (``Run.start``'s, on the run's thread or inline)."""
    ending = None
    try:
        try:
            if payload is None:
                payload = run.runs.store.start(run.task_id)
        except StoreError:
            payload = None                  # stored later, before any other event
            with run.lock:
                run.kept.unstarted = True
        except Exception as ex:  # noqa: BLE001 - the store's failure fails the run
            ending = Ending(FAILED, error=ex)
        if ending is None:
            if payload is not None and run.live is not None:
                # NOTE: only the run's own stream reads the start: no other waiter's
                # predicate changes with it (PERF: a blocking SendMessage takes no lock).
                with run.lock:
                    run._live(payload)
            ending = Ending(CANCELED) if run.stopping else run_agent(run.agent, ctx)
        # PERF: the end marks the agent's call over, under the lock it takes anyway; an
        # overdue run's is marked here, after it (its slot given back). Only this thread
        # marks it: read without the lock.
        end_as(run, ending)
    except BaseException:
        run._agent_returned()           # the agent's call is over all the same
        raise
    if not run.returned:
        run._agent_returned()
    return ending


class OutputPassed(TaskCanceled):
    """An agent's write passed ``limits.max_output_bytes`` (``count_output``): raised out of
    the run's lock, where ``end_passed`` ends the run."""


def count_output(run, size: int) -> None:
    """Count ``size`` bytes the agent wrote (the run's lock held; agents/output.py); past
    ``limits.max_output_bytes`` raise OutputPassed, for ``end_passed`` out of the lock."""
    if not run.output.add(size):
        raise OutputPassed(run.task_id)


def end_passed(run) -> None:
    """The task of a run whose agent wrote past ``limits.max_output_bytes`` ends FAILED and
    the agent is stopped; its call raises TaskCanceled (as every later one does).

    NOTE: out of the run's lock, as every end: a shared store's end is written without it
    (hub/runs.py), and one written under the writer's lock held a CancelTask (its wait for
    the lock) for the write's round trip, past its timeout. Ended first, then stopped (as
    at the run timeout): stopped first, another thread of the agent could end it CANCELED."""
    output = run.output
    try:
        ended = run.finish(FAILED, passed_text("run", output.limit, "limits.max_output_bytes"))
    finally:
        run.request_stop(cancel=False)
    if ended:
        logger.warning("task %s: the agent of %s/%s wrote more than %d bytes "
                       "(limits.max_output_bytes); stopped", run.task_id, run.tenant,
                       run.agent_name, output.limit)
