"""The method table: every JSON-RPC method the door answers, registered once.

A method is its handler and the reader of its params: step 14 reads the params
with ``read(door, call)`` (a reader of ``wire/``) and calls
``handler(door, call, params)`` with the typed value, never the raw JSON.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from murmur_wsgi.errors import (MethodNotFoundError, PushNotificationNotSupportedError,
                                UnsupportedOperationError)
from murmur_wsgi.door.methods import card, completions, messages, session, streams, tasks
from murmur_wsgi.wire.methods import PUSH_METHODS

logger = logging.getLogger(__name__)


def no_params(door, call) -> None:
    """The reader of a method whose params are not read."""
    return None


@dataclass(frozen=True)
class Method:
    """A served method: its handler, its params' reader, whether it starts tasks."""

    handler: Callable              # handler(door, call, params)
    read: Callable = no_params     # read(door, call) -> the handler's typed params
    starts_tasks: bool = False     # not served under lifecycle.task_acceptance: none
    streaming: bool = False        # answered -32004 (not -32601) under none


METHODS = {
    "SendMessage": Method(messages.send_message, messages.message_params, starts_tasks=True),
    "SendStreamingMessage": Method(streams.send_streaming_message, messages.message_params,
                                   starts_tasks=True, streaming=True),
    "GetTask": Method(tasks.get_task, tasks.task_id),
    "ListTasks": Method(tasks.list_tasks, tasks.list_params),
    "CancelTask": Method(tasks.cancel_task, tasks.task_id),
    "SubscribeToTask": Method(streams.subscribe_to_task, tasks.task_id, starts_tasks=True,
                              streaming=True),
    "GetExtendedAgentCard": Method(card.get_extended_agent_card),
    "murmur.WatchSession": Method(streams.watch_session),
    "murmur.StopSession": Method(session.stop_session),
}

# A completion (step 9): a SendMessage delivered to the task waiting on its delegation.
COMPLETION = Method(completions.complete, messages.message_params)



def lookup(name: str, door) -> Method:
    """Step 10: the method, or -32601 / -32003 / -32004 as the door extension says."""
    if name in PUSH_METHODS:
        raise PushNotificationNotSupportedError()
    method = METHODS.get(name)
    if method is None:
        raise MethodNotFoundError()
    if name == "GetExtendedAgentCard" and not door.tokens.enabled:
        raise UnsupportedOperationError("this door is public: it has no extended card")
    if method.starts_tasks and door.manifest.acceptance == "none":
        if method.streaming:
            raise UnsupportedOperationError("this door starts no task, so it streams none")
        raise MethodNotFoundError()
    return method
