"""SubscribeToTask: a task's stored events from the start, then live until its end."""
from __future__ import annotations

import logging
import time
from collections import deque

from murmur_wsgi.errors import InvalidRequestError
from murmur_wsgi.hub.errors import SubscriptionExpiredError
from murmur_wsgi.hub.live import TAKE_BYTES
from murmur_wsgi.hub.methods.tasks import find
from murmur_wsgi.hub.sse import HubStream
from murmur_wsgi.wire.stream import task_event

logger = logging.getLogger(__name__)

EXTRA_LIFETIME_SECS = 2.0         # a subscription lives run timeout + this


def event_source(store, task):
    """Replay the task's log from its first event; once expired, the stored Task.

    What one read of the log brings is handed over about ``TAKE_BYTES`` at a time, the
    worker's other greenlets running between pieces (a long log is one read, not one write).
    MEMORY: an open stream keeps the task's names, not the task (a Redis store's copy of
    it, history included, would be each stream's own).
    """
    read = 0
    tenant, agent, task_id = task.tenant, task.agent, task.id
    waiting: deque = deque()            # events read from the log, not handed over yet

    def source(timeout: float):
        nonlocal read
        if not waiting:
            events, available = store.events(task_id, read, timeout, tenant=tenant)
            if not available:
                current = store.get(tenant, agent, task_id) if read == 0 else None
                if current is not None:
                    return [task_event(store.render(current, as_read=True))], True
                return [], True
            if events:
                read = events[-1].seq       # a log's positions (a trimmed one starts later)
            waiting.extend(events)
        batch, size, done = [], 0, False
        while waiting and (size < TAKE_BYTES or not batch):
            event = waiting.popleft()
            batch.append(event.payload)
            size += len(event.payload)
            done = done or event.terminal
        if waiting:
            time.sleep(0)                   # NOTE: under gevent, the others' turn
        return batch, done
    return source


def subscription(hub, call, task) -> HubStream:
    """A SubscribeToTask stream of ``task``, or -32600 past the tenant's limit."""
    if not hub.subscribe(call.tenant):
        limit = hub.limits(call.tenant)["max_subscriptions"]
        raise InvalidRequestError(f"this tenant already has {limit} SubscribeToTask streams "
                                  "open on this replica; close one, or poll with GetTask")
    stream = hub.config.stream
    lifetime = hub.limits(call.tenant)["run_timeout_secs"] + EXTRA_LIFETIME_SECS
    try:
        return HubStream(call.id, [], event_source(hub.store, task), environ=call.environ,
                         keepalive=stream["keepalive_secs"],
                         write_timeout=stream["write_timeout_secs"], lifetime=lifetime,
                         expired=SubscriptionExpiredError(lifetime).error_object(),
                         on_close=lambda: hub.unsubscribe(call.tenant))
    except BaseException:
        hub.unsubscribe(call.tenant)
        raise


def subscribe_to_task(hub, call):
    return subscription(hub, call, find(hub, call))
