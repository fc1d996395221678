"""GetTask, ListTasks, CancelTask: a tenant's tasks of the agent in the path."""
from __future__ import annotations

import time

from murmur_wsgi.turns import turn
from murmur_wsgi.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError
from murmur_wsgi.hub.held import LARGE_CHARS
from murmur_wsgi.hub.store import StoreError
from murmur_wsgi.wire.params import (read_history_length, read_hub_list_tasks, read_task_id,
                                      task_id_of)
from murmur_wsgi.wire.raw import RawJSON, RawJSONPieces
from murmur_wsgi.wire.task import list_tasks_response


def find(hub, call):
    """The task params.id names, of this tenant's agent in the path; else -32001."""
    task_id = read_task_id(call.params, call.method).id
    task = hub.store.get(call.tenant, call.agent, task_id)
    if task is None:
        raise TaskNotFoundError(task_id)
    return task


def get_task(hub, call):
    """GetTask: the task as it stands, its history trimmed by historyLength."""
    if "historyLength" not in call.params:
        # PERF: the whole task, as the store keeps it (a finished task on Redis: its stored
        # wire form, unparsed). Checks in the same order as below: id, then the store.
        task_id = task_id_of(call.params, call.method)
        text = hub.store.task_json(call.tenant, call.agent, task_id)
        if text is None:
            raise TaskNotFoundError(task_id)
        # PERF: a small one inline, no call
        return RawJSON(text) if len(text) <= LARGE_CHARS else task_answer(hub, call, task_id,
                                                                           text)
    task = find(hub, call)
    text = hub.store.render(task, read_history_length(call.params), as_read=True)
    return RawJSON(text) if len(text) <= LARGE_CHARS else held_answer(hub, call, text)


def task_answer(hub, call, task_id: str, text: str):
    """A task's ``text`` as the store gave it, as an answer: small, inline; large, the
    memory store's kept wire form quoted (not a copy), else a copy counted (``held_answer``).

    NOTE: RawJSON (a str) copies the text it is made of: the memory store's kept wire form
    of a task, one copy, was each GetTask's own until its client had read it all. A large
    one is answered as pieces that quote it (routes.py)."""
    if len(text) <= LARGE_CHARS:
        return RawJSON(text)
    if hub.store.kept(task_id, text):
        return RawJSONPieces((text,))
    return held_answer(hub, call, text)


def held_answer(hub, call, text: str):
    """A large answer of this request's own, counted while its client reads it (held.py)."""
    return hub.held.answer(text, call.tenant, hub.limits(call.tenant)["answer_bytes"])


def cancel_task(hub, call):
    """CancelTask: cut the run, here or on the replica that runs it; CANCELED, or -32002.

    The answer is the task as the store holds it once the run stopped (a run that ended
    meanwhile answers its own end's state): a run ended here whose end the store refused
    (away), or is still writing, is waited for until its end is written, within the
    cancel's timeout; past it, the answer is the store's error (-32603), as for a run whose
    agent is writing through a stall (stopped once its write is through)."""
    task = find(hub, call)
    if task.terminal:
        raise TaskNotCancelableError(task.id, task.state)
    timeout = hub.config.cancel_timeout_secs
    deadline = time.monotonic() + timeout
    run = hub.runs.get(task.id)
    # NOTE: a run that left after its end was refused is in ``Runs.unwritten``: it is
    # over here (added there before it leaves), and its end is the answer once written.
    unwritten = run is None and hub.runs.unwritten_end(task.id)
    # NOTE: a run already ending ended (or is ending) after the task was read (WORKING):
    # it is not cut, its end's state is the answer.
    if not unwritten and (run is None or not run.ending):
        run = _cut(hub, task, run, deadline)
    # NOTE: what is left of the timeout: the stop or the mark may have waited on the run's
    # lock or on the store.
    left = max(0.0, deadline - time.monotonic())
    if unwritten:
        stopped = True
    elif run is not None:
        stopped = run.wait_closed(left)
    else:
        stopped = _ended_in_store(hub.store, task, left)
    if run is not None:
        if run.ending and not run.ended:
            raise StoreError()          # its end's round trip outlasted the timeout
        unwritten = run.store_failed
    if unwritten and not hub.runs.written(task.id, deadline):
        # NOTE: never the task as the store still holds it, WORKING: the store's error, as
        # the sender's answer; once written, a CancelTask again is -32002 naming CANCELED.
        raise StoreError()
    task_id, task = task.id, hub.store.get(call.tenant, call.agent, task.id)
    if task is None:                            # retention forgot it since it stopped
        raise TaskNotFoundError(task_id)
    if not (stopped or task.terminal):
        raise TaskNotCancelableError(task.id, task.state, f"it did not stop within {timeout:g} s")
    if task.state != "TASK_STATE_CANCELED":
        raise TaskNotCancelableError(task.id, task.state)
    # NOTE: a large answer is counted as GetTask's (the task is canceled either way: a
    # refused answer's client reads it with GetTask once there is room).
    return task_answer(hub, call, task.id, hub.store.render(task))


def _cut(hub, task, run, deadline: float):
    """Stop ``run`` (this replica's, or None), or mark the task for the replica that runs
    it: the run found here, if any.

    A run here is only stopped: the mark is for another replica's run (a store that stalls
    would hold the cancel for its timeout to write it). Without a run here, the mark's
    refusal is the answer: nothing was cut."""
    if run is None:
        hub.store.mark_cancel(task.id, tenant=task.tenant)   # another replica's run hears it
        # NOTE: a message's task is stored and started a moment before its run is
        # registered: under real threads this cancel may come between. Looked for again
        # after the mark, the run is found here, or reads the mark as it is registered
        # (``Runs.add``).
        run = hub.runs.get(task.id)
    # NOTE: an agent's write holds the run's lock through its store's round trip: one that
    # meets a stall past the deadline is the store's error, and the run is stopped once
    # the write is through (``Run.request_stop``); a CancelTask again then names its end.
    if run is not None and not run.request_stop(True, max(0.0, deadline - time.monotonic())):
        raise StoreError()
    return run


def _ended_in_store(store, task, timeout: float) -> bool:
    """Wait (reading the task's log from its newest event on) until its final event, at
    most ``timeout``.

    NOTE: not from the start: a run's log holds up to ``limits.max_output_bytes``, and each
    CancelTask read it whole (on Redis a page at a time) before it came to the end."""
    deadline = time.monotonic() + timeout
    after = max(0, store.last_position(task.id, task.tenant) - 1)
    while True:
        left = deadline - time.monotonic()
        events, available = store.events(task.id, after, max(0.0, left),
                                         tenant=task.tenant)
        if any(event.terminal for event in events):
            return True
        if not available or left <= 0:
            return False
        if events:
            after = events[-1].seq


def _rendered(store, tasks: list, params):
    """Each task of a page as ListTasks answers it, the worker's other requests answered
    between them once ``TURN_SECS`` has passed (``murmur_wsgi/turns.py``): a page of 16 MiB
    (``limits.list_bytes``) is about 0.1 s of encoding."""
    ends = 0.0
    for task in tasks:
        yield store.render(task, params.history_length, params.include_artifacts, as_read=True)
        ends = turn(ends)


def list_tasks(hub, call):
    """ListTasks: newest first, scoped to the tenant and the agent in the path; a page ends
    before the first task past ``limits.list_bytes`` (their stored forms: at least one)."""
    params = read_hub_list_tasks(call.params)
    cutoff_ms = None if params.cutoff_us is None else params.cutoff_us / 1000
    try:
        page = hub.store.list(call.tenant, call.agent, context_id=params.context_id,
                              state=params.state, after_ms=cutoff_ms,
                              page_size=params.page_size, token=params.token,
                              max_bytes=hub.limits(call.tenant)["list_bytes"])
    except ValueError:
        raise InvalidParamsError("Invalid params: pageToken is not a nextPageToken this hub "
                                 "answered") from None
    body = ",".join(_rendered(hub.store, page.tasks, params))
    text = list_tasks_response(body, page.next_token, params.page_size, page.total)
    return RawJSON(text) if len(text) <= LARGE_CHARS else held_answer(hub, call, text)
