"""The Redis store's key names (every key starts with ``PREFIX``; docs/hub.md has the layout).

``PREFIX`` holds the hash tag ``{hub}``: on a Redis Cluster every key of the store hashes
to one slot (a key's slot is that of its first ``{…}``, so no id or name inside a key can
move it), and each script and pipeline touches that slot only.

One home for every name a part of the Redis store writes or a script builds,
so the task store, the replicas, the counters and push name each key alike.
"""
from __future__ import annotations

PREFIX = "murmur:{hub}:"
CHANNEL = PREFIX + "cancel"                 # pub/sub: cancel marks and swept tasks
EVENTS = PREFIX + "events"                  # pub/sub: "<task id> <n>" for every event written
REPLICAS = PREFIX + "replicas"              # every replica that ran a task
PUSH_ACTIVE = PREFIX + "push:active"        # {task}/{config} of the configs with work left
PUSH_WAKE = PREFIX + "push:wake"            # the stream that wakes waiting dispatchers
PUSH_COUNTER = PREFIX + "push:n"            # the last creation number of a config


def key(*parts: str) -> str:
    """``PREFIX`` then ``parts`` joined by ``:`` (``key("task", id)`` is ``…task:{id}``)."""
    return PREFIX + ":".join(parts)


def task_key(task_id: str) -> str:
    return key("task", task_id)


def events_key(task_id: str) -> str:
    return key("ev", task_id)


def msg_key(tenant: str, agent: str, message_id: str) -> str:
    return key("msg", tenant, agent, message_id)


def index_key(tenant: str, agent: str, context_id: str | None = None) -> str:
    """Every task of the agent, or (``context_id``) a context's."""
    if context_id is None:
        return key("idx", tenant, agent)
    return key("ctx", tenant, agent, context_id)


def both_key(tenant: str, agent: str, state: str, context_id: str) -> str:
    """A context's tasks in one state (the state first: it has no ``:``)."""
    return key("cst", tenant, agent, state, context_id)


def mark_key(task_id: str) -> str:
    """A task's cancel mark."""
    return key("cancel", task_id)


def seq_key(tenant: str, agent: str) -> str:
    """The agent's last creation number."""
    return key("seq", tenant, agent)


def runs_key(replica: str) -> str:
    """A replica's runs in flight."""
    return key("runs", replica)


def live_key(replica: str) -> str:
    """A replica's liveness."""
    return key("replica", replica)


def state_key(tenant: str, agent: str, state: str) -> str:
    """The agent's tasks in one state."""
    return key("st", tenant, agent, state)


def updated_key(tenant: str, agent: str) -> str:
    """The agent's tasks by status time."""
    return key("upd", tenant, agent)


def done_key(tenant: str) -> str:
    """The tenant's finished tasks by their end: retention's order."""
    return key("done", tenant)


def running_key(tenant: str) -> str:
    """The tenant's admission slots."""
    return key("running", tenant)


def rate_key(tenant: str) -> str:
    """The tenant's token bucket."""
    return key("rate", tenant)


def configs_key(task_id: str) -> str:
    """The task's push configs."""
    return key("push", task_id)


def lease_key(member: str) -> str:
    """A push config's delivery lease."""
    return key("push", "lease", member)


def slots_key(tenant: str) -> str:
    """The tenant's push deliveries at once."""
    return key("push", "slots", tenant)
