"""Push configs and delivery leases: the part of the store push needs (hub/push/).

Every method is one atomic step, so a store shared by replicas (Redis) can
do each as one script: a save checks the task's config count and sets the
config's cursor (the event after which it is notified) in the same step; a
lease is a set-if-absent with an expiry (``LEASE_SECS``), refused while the
config's tenant already holds ``TENANT_DELIVERIES`` leases; an advance moves
the cursor and the failure count only for the lease's holder and the
config's current generation (a config replaced or deleted meanwhile is left
alone). ``memory_push.MemoryPushStore`` implements them, and
``redis_push.RedisPushStore`` (a lease there counts only while its holder replica lives).
"""
from __future__ import annotations

import abc
import logging
from dataclasses import dataclass, replace

from murmur_wsgi.wire.encode import utf8_bytes

logger = logging.getLogger(__name__)

MAX_CONFIGS_PER_TASK = 10
LEASE_SECS = 60.0              # one replica at a time delivers a config
TENANT_DELIVERIES = 2          # configs of one tenant being delivered at once
MAX_FAILURES = 5               # failed events in a row that disable a config

DELIVERED, DROPPED, SKIPPED = "delivered", "dropped", "skipped"    # push_advance's outcomes
TASK_GONE = "task gone"        # push_save's answer when the task is not (or no longer) kept


@dataclass(frozen=True, slots=True)
class PushRecord:
    """One stored config and its delivery state (a value: stores hand out copies)."""

    tenant: str
    agent: str
    task_id: str
    id: str
    url: str
    token: str | None
    cursor: int = 0                    # the last event seq handled (delivered, dropped, skipped)
    failures: int = 0                  # failed events in a row
    disabled: bool = False
    disabled_ms: int | None = None
    last_error: str | None = None
    generation: int = 0                # bumped by every save (a replace starts afresh)
    created: int = 0                   # order of creation within its task

    @property
    def key(self) -> tuple[str, str]:
        return (self.task_id, self.id)

    def row(self) -> tuple:
        """Its fields in their order, as one tuple (``PushRecord(*row)`` again): a value the
        garbage collector stops tracking (the memory store keeps configs so)."""
        return (self.tenant, self.agent, self.task_id, self.id, self.url, self.token,
                self.cursor, self.failures, self.disabled, self.disabled_ms, self.last_error,
                self.generation, self.created)

    def but(self, **changes) -> PushRecord:
        return replace(self, **changes)

    @property
    def size(self) -> int:
        """Its bytes as its tenant's kept bytes count them (``tasks.max_bytes_per_tenant``):
        its task's id, its own, its URL and its token, in UTF-8 (what a client sets; not its
        delivery state, which changes with every event). Up to about 2.7 KB a config, ten a
        task: with push, a tenant's configs could otherwise outgrow its finished tasks."""
        return sum(utf8_bytes(text) for text in (self.task_id, self.id, self.url, self.token)
                   if text)


class PushStorage(abc.ABC):
    """What push needs from a store, beside the task's event log (``TaskStore.events``)."""

    @abc.abstractmethod
    def push_save(self, record: PushRecord, from_start: bool) -> PushRecord | None:
        """Save or replace (same task and id) a config, enabled, failures 0.

        ``from_start``: notify from the task's first event (a config sent with
        the message); otherwise only events after this call. None when the
        task already has MAX_CONFIGS_PER_TASK other configs; ``TASK_GONE`` (nothing
        kept) when the task is not kept, as when retention forgot it after the
        caller found it.

        Its ``size`` counts toward its task's bytes (``retention``), the difference when it
        replaces one: its tenant's kept bytes at once once the task finished, else at its
        end. Retention acts on them at the tenant's next end, or the sweep.
        """

    @abc.abstractmethod
    def push_get(self, tenant: str, agent: str, task_id: str, config_id: str):
        """The config, or None (another tenant's or agent's is None too)."""

    @abc.abstractmethod
    def push_list(self, tenant: str, agent: str, task_id: str) -> list:
        """The task's configs, in creation order."""

    @abc.abstractmethod
    def push_delete(self, tenant: str, agent: str, task_id: str, config_id: str) -> bool:
        """Forget the config (its ``size`` taken from its task's bytes); False when there
        was none."""

    @abc.abstractmethod
    def push_due(self, owner: str, timeout: float, skip=frozenset()) -> list:
        """Configs with events past their cursor, enabled, under no live lease, not in
        ``skip`` (keys). Waits up to ``timeout`` for one, a change, or ``notify_push``.

        A store may hold back a config of a running task whose pending events are all
        artifact chunks (never sent): Redis does, up to a batch, so a streamed run does
        not take its config's lease for every chunk.
        """

    @abc.abstractmethod
    def notify_push(self) -> None:
        """Wake every ``push_due`` waiting in this process."""

    @abc.abstractmethod
    def push_lease(self, record: PushRecord, owner: str) -> bool:
        """Take (or renew) the config's lease for LEASE_SECS; False when another holds it or
        its tenant already has TENANT_DELIVERIES leases."""

    @abc.abstractmethod
    def push_release(self, record: PushRecord, owner: str) -> None:
        """Give the lease back (only its holder can)."""

    @abc.abstractmethod
    def push_advance(self, record: PushRecord, owner: str, seq: int, outcome: str,
                     error: str | None = None):
        """Event ``seq`` is handled: DELIVERED, DROPPED (with ``error``) or SKIPPED (not sent).

        A dropped event counts a failure; MAX_FAILURES in a row disable the
        config; a delivery resets the count. Renews the lease. Returns the
        record as saved, or None when ``owner`` lost the lease or the config
        was replaced or deleted meanwhile.
        """
