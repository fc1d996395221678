"""SendMessage and SendStreamingMessage: idempotency, admission, the run, its answer."""
from __future__ import annotations

import logging
import time
import uuid

from murmur_wsgi.agents.blocks import data_block
from murmur_wsgi.errors import InvalidRequestError
from murmur_wsgi.hub.context import Caller, HubContext, Turn
from murmur_wsgi.hub.push.methods import message_config, save_message_config
from murmur_wsgi.hub.runs import Run
from murmur_wsgi.hub.sse import HubStream
from murmur_wsgi.hub.store import PENDING, StoreError
from murmur_wsgi.hub.task import COMPLETED, REJECTED, HubTask
from murmur_wsgi.serving.connection import peer_gone
from murmur_wsgi.wire.message_hub import read_hub_message, stored_message
from murmur_wsgi.wire.raw import RawJSON
from murmur_wsgi.wire.stream import task_event

logger = logging.getLogger(__name__)

HISTORY_TURNS = 50             # earlier tasks of a context a run is handed (ctx.history)
CLOSING = "the hub is shutting down; send the message again later"
PEER_CHECK_SECS = 1.0          # a held SendMessage looks at its client this often


def agent_text(parts: list) -> str:
    """What the agent reads: the text parts, and each data part in its fence, by newlines."""
    return "\n".join(part[1] if part[0] == "text" else data_block(*part[1:]) for part in parts)


def _text_of(message: dict) -> str:
    return "\n".join(p["text"] for p in message.get("parts", [])
                     if isinstance(p, dict) and isinstance(p.get("text"), str))


def context_history(hub, tenant: str, agent: str, context_id: str) -> list[Turn]:
    """The earlier turns of a context: each task's message, then its answer when completed."""
    turns = []
    for task in hub.store.context_tasks(tenant, agent, context_id, HISTORY_TURNS):
        turns.append(Turn("user", _text_of(task.history[0])))
        if task.state == COMPLETED and task.artifacts:
            turns.append(Turn("agent", task.artifacts[0]["parts"][0].get("text", "")))
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
    msg = read_hub_message(call.params)                   # the request limits, first
    text = agent_text(msg.parts)
    push = message_config(hub, msg.push_config)
    store = hub.store
    found = store.claim_message(call.tenant, call.agent, msg.message_id)
    admitted = None
    if found == PENDING:
        raise InvalidRequestError("a message with this messageId is still being started; "
                                  "ask again in a moment")
    if found is not None:
        task = store.get(call.tenant, call.agent, found)
        if push is not None:
            save_message_config(hub, call, push, task.id, from_start=False)
        return msg, Accepted(task, snapshot=store.render(task, msg.history_length),
                             existing=True)
    try:
        task_id = str(uuid.uuid4())
        context_id = msg.context_id or str(uuid.uuid4())
        history = context_history(hub, call.tenant, call.agent, context_id) \
            if msg.context_id else []
        task = HubTask(task_id, context_id, call.tenant, call.agent, msg.message_id,
                       stored_message(msg.message, task_id, context_id))
        reason = CLOSING if hub.closing else hub.admission.admit(call.tenant, call.agent,
                                                                 text, task_id)
        if reason is None:
            admitted = task_id
        else:
            task.set_state(REJECTED, reason)
            store.create(task, task.task_event(), bind=False)
            if push is not None:
                save_message_config(hub, call, push, task.id, from_start=True)
            return msg, Accepted(task, snapshot=store.render(task, msg.history_length))
        run = Run(hub.runs, task, hub.agents[(call.tenant, call.agent)],
                  hub.limits(call.tenant),
                  hub.config.stream["live_backlog_bytes"] if live else None)
        first = task.task_event()
        snapshot = task.to_json(msg.history_length)
        store.create(task, first)
        if push is not None:
            save_message_config(hub, call, push, task.id, from_start=True)
    except BaseException:
        try:
            store.release_message(call.tenant, call.agent, msg.message_id)
            if admitted is not None:
                hub.admission.release(call.tenant, admitted)
        except StoreError:
            pass                # the claim and the slot expire by themselves (a shared store)
        raise
    hub.runs.add(run)
    ctx = HubContext(run, text, msg.data, task.history[0],
                     Caller(call.tenant, call.subject, call.agent), history)
    run.start(ctx)
    return msg, Accepted(task, run, snapshot)


def send_message(hub, call):
    """SendMessage: ``{"task": …}``, blocking by default; SUBMITTED with returnImmediately."""
    msg, accepted = accept(hub, call, live=False)
    run = accepted.run
    if run is None or msg.return_immediately:
        return RawJSON(task_event(accepted.snapshot))
    gone = peer_gone(call.environ)
    runs = hub.runs
    while not runs.wait(lambda: run.ended, PEER_CHECK_SECS):
        if gone is not None and gone():
            logger.info("task %s: the client left a blocking SendMessage; canceling", run.task_id)
            run.request_stop(cancel=True)
            break
    answer = hub.store.render(accepted.task, msg.history_length, cache=False)
    return RawJSON(task_event(answer))


def live_source(hub, run):
    """The run's own events until its final status, a bounded piece at a time (hub/live.py)."""
    runs = hub.runs
    live = run.live

    def source(timeout: float):
        with runs.changed:
            runs.changed.wait_for(lambda: live.pending() or run.ended, timeout)
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
