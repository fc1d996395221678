"""SendMessage and SendStreamingMessage: idempotency, admission, the run, its answer."""
from __future__ import annotations

import logging
import time

from murmur_wsgi.agents.blocks import OverBudget, parts_text
from murmur_wsgi.agents.inline import runs_inline
from murmur_wsgi.errors import InvalidParamsError, InvalidRequestError
from murmur_wsgi.hub.context import Caller, HubContext, Turn
from murmur_wsgi.hub.held import LARGE_CHARS
from murmur_wsgi.hub.methods.tasks import held_answer
from murmur_wsgi.hub.push.methods import message_config, save_message_config
from murmur_wsgi.hub.runs import Run
from murmur_wsgi.hub.sse import HubStream
from murmur_wsgi.hub.store import PENDING, StoreError
from murmur_wsgi.hub.store.base import Opened
from murmur_wsgi.hub.task import ANSWER, COMPLETED, FAILED, REJECTED, HubTask
from murmur_wsgi.ids import random_uuid
from murmur_wsgi.serving.connection import peer_gone
from murmur_wsgi.serving.envelope import loads_own
from murmur_wsgi.wire.encode import compact_utf8
from murmur_wsgi.wire.message_hub import read_hub_message, stored_message
from murmur_wsgi.wire.raw import RawJSON
from murmur_wsgi.wire.stream import task_event

logger = logging.getLogger(__name__)

HISTORY_TURNS = 50             # earlier tasks of a context a run is handed (ctx.history)
CLOSING = "the hub is shutting down; send the message again later"
NOT_STARTED = "the task could not be started; send the message again"
STILL_STARTING = "a message with this messageId is still being started; ask again in a moment"
PEER_CHECK_SECS = 1.0          # a held SendMessage looks at its client this often


def agents_copy(message: dict, data: list) -> tuple[dict, list]:
    """The message and its data values as the agent gets them: a copy of its own when they
    hold objects (a data value, metadata), so that nothing the agent does to them changes
    the task's stored message (the memory store keeps these very objects)."""
    if not data and "metadata" not in message:
        for part in message["parts"]:       # PERF: a loop, not all() over a generator
            if "metadata" in part:
                break
        else:
            return message, data
    own = loads_own(compact_utf8(message))
    return own, [part["data"] for part in own["parts"] if part.get("data") is not None]


def agent_text(parts: list, budget: int) -> str:
    """What the agent reads: the text parts, and each data part in its fence, by newlines.

    The data parts, pretty-printed, make at most ``budget`` bytes (``limits.data_text_bytes``,
    else -32602): indented, deep data grows up to ~60 times its body."""
    try:
        return parts_text(parts, budget)
    except OverBudget:
        raise InvalidParamsError(
            f"Invalid params: the message's data parts, pretty-printed for the agent, "
            f"are more than limits.data_text_bytes ({budget}) bytes") from None


def _text_of(message: dict) -> str:
    return "\n".join(p["text"] for p in message.get("parts", [])
                     if isinstance(p, dict) and isinstance(p.get("text"), str))


def context_history(hub, tenant: str, agent: str, context_id: str) -> list[Turn]:
    """The earlier turns of a context: each task's message, then its answer when completed
    (of the last ``HISTORY_TURNS`` tasks, the newest within ``limits.history_bytes``)."""
    turns = []
    for task in hub.store.context_tasks(tenant, agent, context_id, HISTORY_TURNS,
                                        hub.limits(tenant)["history_bytes"]):
        history, artifacts = task.contents()
        turns.append(Turn("user", _text_of(history[0])))
        # NOTE: the answer is listed after the agent's named artifacts (one may have no part)
        answer = artifacts[-1] if artifacts else None
        if task.state == COMPLETED and answer is not None and answer["artifactId"] == ANSWER:
            turns.append(Turn("agent", answer["parts"][0].get("text", "")))
    return turns


class Accepted:
    """What ``accept`` decided: an existing task, a rejection, or a new run."""

    __slots__ = ("task", "run", "snapshot", "existing")

    def __init__(self, task, run=None, snapshot: str = "", existing: bool = False):
        self.task = task
        self.run = run
        self.snapshot = snapshot
        self.existing = existing


def accept(hub, call, live: bool):
    """Read the message, apply idempotency and admission; start the run when admitted."""
    limits = hub.limits(call.tenant)
    msg = read_hub_message(call.params, limits["max_parts"])   # the request limits, first
    text = agent_text(msg.parts, limits["data_text_bytes"])
    push = message_config(hub, msg.push_config)
    store = hub.store
    task_id = random_uuid()
    context_id = msg.context_id or random_uuid()
    history = context_history(hub, call.tenant, call.agent, context_id) \
        if msg.context_id else []
    task = HubTask(task_id, context_id, call.tenant, call.agent, msg.message_id,
                   stored_message(msg.message, task_id, context_id))
    first = task.task_event()
    snapshot = task.to_json(msg.history_length)
    # NOTE: twice at most: the task a claim names may be forgotten (retention) before it
    # is read, and the messageId is free again then.
    for _ in range(2):
        if hub.closing:
            found = store.claim_message(call.tenant, call.agent, msg.message_id)
            admitted = Opened(found=found, reason=None if found else CLOSING)
        else:
            admitted = hub.admission.open(store, task, text, first)
        if admitted.found == PENDING:
            raise InvalidRequestError(STILL_STARTING)
        if admitted.found is None:
            break
        existing = store.get(call.tenant, call.agent, admitted.found)
        if existing is not None:
            if push is not None:
                save_message_config(hub, call, push, existing.id, from_start=False)
            return msg, Accepted(existing, snapshot=store.render(existing, msg.history_length),
                                 existing=True)
    else:
        raise InvalidRequestError(STILL_STARTING)
    if admitted.reason is not None:
        task.set_state(REJECTED, admitted.reason)
        try:
            store.create(task, task.task_event(), bind=False)
        except BaseException:
            _release_claim(store, task)
            raise
        if push is not None:
            save_message_config(hub, call, push, task.id, from_start=True)
        return msg, Accepted(task, snapshot=store.render(task, msg.history_length))
    try:
        run = Run(hub.runs, task, hub.agents[(call.tenant, call.agent)], limits,
                  hub.config.stream["live_backlog_bytes"] if live else None)
        if push is not None:
            save_message_config(hub, call, push, task.id, from_start=True)
    except BaseException:
        _abandon(hub, task)
        raise
    run.keep_answer = not live and not msg.return_immediately
    hub.runs.add(run)
    message, data = agents_copy(task.history[0], msg.data)
    ctx = HubContext(run, text, data, message, Caller(call.tenant, call.subject, call.agent),
                     history)
    # A blocking SendMessage only waits for the end: an agent whose run does not wait
    # runs here (``agents/inline.py``).
    run.start(ctx, admitted.started, inline=run.keep_answer and runs_inline(run.agent, text))
    return msg, Accepted(task, run, snapshot)


def _release_claim(store, task) -> None:
    try:
        store.release_message(task.tenant, task.agent, task.message_id)
    except StoreError:
        pass                    # the claim expires by itself (a shared store)


def _abandon(hub, task) -> None:
    """A task stored and started whose run cannot begin ends FAILED (now, or once the store
    answers again: ``Runs.unwritten``), and its slot is given back."""
    args = (task.id, FAILED, NOT_STARTED, None, [], (0, 0), None)
    try:
        hub.store.end(*args)
    except StoreError:
        with hub.runs.lock:
            hub.runs.unwritten.append(args)
    if hub.admission.counters.ends_free:
        return                  # the end freed the slot, or will once written
    hub.admission.release(task.tenant, task.id)


def send_message(hub, call):
    """SendMessage: ``{"task": …}``, blocking by default; SUBMITTED with returnImmediately."""
    msg, accepted = accept(hub, call, live=False)
    run = accepted.run
    if run is None or msg.return_immediately:
        text = task_event(accepted.snapshot)
        if accepted.existing and len(text) > LARGE_CHARS:
            # NOTE: the task again, as a GetTask answers it: a copy of this request's own,
            # counted while its client reads it (hub/held.py).
            return held_answer(hub, call, text)
        return RawJSON(text)
    # PERF: an inline run has ended already (``ended`` never goes back): no lock, no wait.
    if not run.ended:
        gone = peer_gone(call.environ)
        while not run.wait(lambda: run.ended, PEER_CHECK_SECS):
            if gone is not None and gone():
                logger.info("task %s: the client left a blocking SendMessage; canceling",
                            run.task_id)
                run.request_stop(cancel=True)
                break
    if run.store_failed:
        # NOTE: its end is not written yet (Runs.unwritten): the store holds the task as it
        # was, WORKING. The store's error, as the sender's stream ends (``live_source``).
        raise StoreError()
    # NOTE: set before ``ended`` (under the run's lock): no lock needed to read it after.
    answer = run.final_json if msg.history_length is None else None
    if answer is None:
        answer = hub.store.render(accepted.task, msg.history_length, cache=False)
    return RawJSON(task_event(answer))


def live_source(hub, run):
    """The run's own events until its final status, a bounded piece at a time (hub/live.py)."""
    live = run.live

    def source(timeout: float):
        changed = run.changed
        with changed:
            changed.wait_for(lambda: live.pending() or run.ended, timeout)
            batch = live.take()
            more = live.pending()
            done = run.ended and not more
        if done and run.store_failed:
            raise StoreError()
        if more:
            # NOTE: under gevent a write to a fast client may never block: the worker's
            # other greenlets get their turn between pieces.
            time.sleep(0)
        return batch, done
    return source


def send_streaming_message(hub, call):
    """SendStreamingMessage: the Task (SUBMITTED), WORKING, the answer's chunks, the end."""
    msg, accepted = accept(hub, call, live=True)
    stream = hub.config.stream
    if accepted.existing:
        from murmur_wsgi.hub.methods.streams import subscription

        return subscription(hub, call, accepted.task)
    opening = [task_event(accepted.snapshot)]
    run = accepted.run
    if run is None:
        return HubStream(call.id, opening, lambda timeout: ([], True), environ=call.environ,
                         keepalive=stream["keepalive_secs"],
                         write_timeout=stream["write_timeout_secs"])
    return HubStream(call.id, opening, live_source(hub, run), environ=call.environ,
                     keepalive=stream["keepalive_secs"],
                     write_timeout=stream["write_timeout_secs"],
                     on_abort=lambda: run.request_stop(cancel=True))
