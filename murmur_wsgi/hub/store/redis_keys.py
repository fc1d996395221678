"""The Redis store's key names (every key starts with ``PREFIX``; docs/hub.md has the layout).

One home for every name a part of the Redis store writes or a script builds,
so the task store, the replicas, the counters and push name each key alike.
"""
from __future__ import annotations

PREFIX = "murmur:hub:"
CHANNEL = PREFIX + "cancel"                 # pub/sub: cancel marks and swept tasks
REPLICAS = PREFIX + "replicas"              # every replica that ran a task


def task_key(task_id: str) -> str:
    return f"{PREFIX}task:{task_id}"


def events_key(task_id: str) -> str:
    return f"{PREFIX}ev:{task_id}"


def msg_key(tenant: str, agent: str, message_id: str) -> str:
    return f"{PREFIX}msg:{tenant}:{agent}:{message_id}"


def mark_key(task_id: str) -> str:
    return f"{PREFIX}cancel:{task_id}"


def seq_key(tenant: str, agent: str) -> str:
    return f"{PREFIX}seq:{tenant}:{agent}"


def runs_key(replica: str) -> str:
    return f"{PREFIX}runs:{replica}"


def live_key(replica: str) -> str:
    return f"{PREFIX}replica:{replica}"


def index_key(tenant: str, agent: str, context_id: str | None = None) -> str:
    if context_id is None:
        return f"{PREFIX}idx:{tenant}:{agent}"
    return f"{PREFIX}ctx:{tenant}:{agent}:{context_id}"


def state_key(tenant: str, agent: str, state: str) -> str:
    return f"{PREFIX}st:{tenant}:{agent}:{state}"


def both_key(tenant: str, agent: str, state: str, context_id: str) -> str:
    """A context's tasks in one state (the state first: it has no ``:``)."""
    return f"{PREFIX}cst:{tenant}:{agent}:{state}:{context_id}"


def done_key(tenant: str) -> str:
    """The tenant's finished tasks, scored by their end (ms): retention's order."""
    return f"{PREFIX}done:{tenant}"


def updated_key(tenant: str, agent: str) -> str:
    return f"{PREFIX}upd:{tenant}:{agent}"


def running_key(tenant: str) -> str:
    return f"{PREFIX}running:{tenant}"


def rate_key(tenant: str) -> str:
    return f"{PREFIX}rate:{tenant}"


def configs_key(task_id: str) -> str:
    return f"{PREFIX}push:{task_id}"
