"""The Redis store's key names (docs/hub.md has the layout and how keys map to slots).

Every key carries a Redis Cluster hash tag, its first ``{…}``, which alone picks its
slot. A tenant's keys share the tag of its own, ``{t:<tenant>}`` (``tenant_prefix``):
its task records, events, indexes, claims, cancel marks, push configs and leases,
admission counters and retention set all hash to one slot, so each script and each
pipeline of a tenant's keys touches that slot only, and tenants spread over a
cluster's primaries. The keys of the whole hub (the replicas, their liveness and runs,
push's set of active configs, the tenants that ended a task) share the tag ``{hub}``
(``HUB``). A tenant name outside ``[A-Za-z0-9._-]`` (hub.yaml allows none) is
percent-encoded in its tag, so no name can close the tag early or take another tenant's:
the tag is one tenant's, and only its.

One home for every name a part of the Redis store writes, so the task store, the
replicas, the counters and push name each key alike; no script builds a key.
"""
from __future__ import annotations

from functools import lru_cache
from urllib.parse import quote, unquote

HUB = "murmur:{hub}:"
CHANNEL = HUB + "cancel"                    # pub/sub: cancel marks and swept tasks
EVENTS = HUB + "events"                     # pub/sub: "<task id> <n>" for every event written
PUSH_WAKE = HUB + "push:wake"               # pub/sub: a push config saved, deleted, released
REPLICAS = HUB + "replicas"                 # every replica that may have runs
PUSH_ACTIVE = HUB + "push:active"           # an older hub's <tenant>/<task>/<config> listed
PUSH_TENANTS = HUB + "push:tenants"         # the tenants of push:active:<tenant>
TENANTS = HUB + "tenants"                   # every tenant that ended a task: the sweep's
TENANT_PREFIX = "murmur:{t:"                 # every tenant's keys begin so


@lru_cache(maxsize=4096)
def _quoted(tenant: str) -> str:
    """The tenant percent-encoded outside ``[A-Za-z0-9._-]`` (its tag's, its members')."""
    return quote(tenant, safe="._-")


@lru_cache(maxsize=4096)
def tenant_prefix(tenant: str) -> str:
    """``murmur:{t:<tenant>}:``, the tenant percent-encoded outside ``[A-Za-z0-9._-]``."""
    return TENANT_PREFIX + _quoted(tenant) + "}:"


# --- a tenant's keys (its slot) ------------------------------------------------------

def task_key(tenant: str, task_id: str) -> str:
    return tenant_prefix(tenant) + "task:" + task_id


def events_key(tenant: str, task_id: str) -> str:
    return tenant_prefix(tenant) + "ev:" + task_id


def mark_key(tenant: str, task_id: str) -> str:
    """A task's cancel mark."""
    return tenant_prefix(tenant) + "cancel:" + task_id


def configs_key(tenant: str, task_id: str) -> str:
    """The task's push configs."""
    return tenant_prefix(tenant) + "push:" + task_id


def msg_key(tenant: str, agent: str, message_id: str) -> str:
    return tenant_prefix(tenant) + f"msg:{agent}:{message_id}"


def index_key(tenant: str, agent: str, context_id: str | None = None) -> str:
    """Every task of the agent, or (``context_id``) a context's."""
    if context_id is None:
        return tenant_prefix(tenant) + "idx:" + agent
    return tenant_prefix(tenant) + f"ctx:{agent}:{context_id}"


def both_key(tenant: str, agent: str, state: str, context_id: str) -> str:
    """A context's tasks in one state (the state first: it has no ``:``)."""
    return tenant_prefix(tenant) + f"cst:{agent}:{state}:{context_id}"


# PERF: the names of a tenant's agent (and of its states), made once and kept (tenants and
# agents are hub.yaml's, states a few): a blocking SendMessage names a dozen of them.
@lru_cache(maxsize=4096)
def seq_key(tenant: str, agent: str) -> str:
    """The agent's last creation number."""
    return tenant_prefix(tenant) + "seq:" + agent


@lru_cache(maxsize=4096)
def state_key(tenant: str, agent: str, state: str) -> str:
    """The agent's tasks in one state."""
    return tenant_prefix(tenant) + f"st:{agent}:{state}"


@lru_cache(maxsize=4096)
def updated_key(tenant: str, agent: str) -> str:
    """The agent's tasks by status time."""
    return tenant_prefix(tenant) + "upd:" + agent


def done_key(tenant: str) -> str:
    """The tenant's finished tasks by their end: retention's order."""
    return tenant_prefix(tenant) + "done"


def sizes_key(tenant: str) -> str:
    """The bytes of each of the tenant's finished tasks (id -> bytes): retention's measure."""
    return tenant_prefix(tenant) + "sizes"


def bytes_key(tenant: str) -> str:
    """The sum of the tenant's ``sizes``."""
    return tenant_prefix(tenant) + "bytes"


@lru_cache(maxsize=4096)
def retained_keys(tenant: str) -> tuple:
    """Retention's keys of the tenant, as its scripts take them: ``done``, ``sizes``,
    ``bytes`` (PERF: named once a tenant, as every end sends them)."""
    return done_key(tenant), sizes_key(tenant), bytes_key(tenant)


@lru_cache(maxsize=4096)
def running_key(tenant: str) -> str:
    """The tenant's admission slots."""
    return tenant_prefix(tenant) + "running"


@lru_cache(maxsize=4096)
def rate_key(tenant: str) -> str:
    """The tenant's token bucket."""
    return tenant_prefix(tenant) + "rate"


def push_counter_key(tenant: str) -> str:
    """The last creation number of the tenant's push configs (List's order)."""
    return tenant_prefix(tenant) + "push:n"


def lease_key(tenant: str, task_id: str, config_id: str) -> str:
    """A push config's delivery lease."""
    return tenant_prefix(tenant) + f"push:lease:{task_id}/{config_id}"


def slots_key(tenant: str) -> str:
    """The tenant's push deliveries at once."""
    return tenant_prefix(tenant) + "push:slots"


# --- the hub's keys (the slot of {hub}) -----------------------------------------------

def runs_key(replica: str) -> str:
    """A replica's runs in flight (each a ``member``)."""
    return HUB + "runs:" + replica


def live_key(replica: str) -> str:
    """A replica's liveness."""
    return HUB + "replica:" + replica


def push_active_key(quoted: str) -> str:
    """A tenant's push configs with work left (each a ``member``, scored by when it was
    listed), the tenant as ``member`` writes it (``PUSH_TENANTS`` lists it so)."""
    return HUB + "push:active:" + quoted


def member(tenant: str, *parts: str) -> str:
    """A task (or a task's push config) in a hub-wide set: ``<tenant>/<task id>[/<config
    id>]``, the tenant percent-encoded as in its tag (so it has no ``/``)."""
    return "/".join((_quoted(tenant), *parts))


def split_member(found: str) -> tuple[str, str]:
    """``(tenant, the rest)`` of a ``member``."""
    tenant, _, rest = found.partition("/")
    return unquote(tenant), rest
