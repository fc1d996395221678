"""The hub's JSON-RPC methods: ``METHODS`` maps each name to its handler."""
from __future__ import annotations

from murmur_wsgi.hub.methods import messages, streams, tasks

METHODS = {
    "SendMessage": messages.send_message,
    "SendStreamingMessage": messages.send_streaming_message,
    "GetTask": tasks.get_task,
    "ListTasks": tasks.list_tasks,
    "CancelTask": tasks.cancel_task,
    "SubscribeToTask": streams.subscribe_to_task,
}
