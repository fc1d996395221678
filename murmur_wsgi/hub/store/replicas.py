"""The replicas' part of a store: liveness, cancels heard from other replicas, the sweep.

A shared store (Redis) is used by several serving processes, each a replica:
each renews its liveness, hears the cancel marks any replica sets, and
sweeps the runs of replicas that stopped answering. One process (the memory
store) has no other replica: ``LocalReplicas`` does nothing.
"""
from __future__ import annotations

import abc


class ReplicaStore(abc.ABC):
    """What ``hub/replica.py`` asks of the store; every method may raise ``StoreError``."""

    @abc.abstractmethod
    def listen_cancels(self, callback, lost=None) -> None:
        """Call ``callback(task_id)`` when any replica marks a task, or its sweep ends one
        (pub/sub); and ``lost()`` when the channel is back after a loss (what it carried
        meanwhile reached nobody: look at the marks and ends once). Both on the listener's
        thread: neither may block."""

    @abc.abstractmethod
    def cancel_marks(self, runs: list) -> set:
        """The task ids of ``runs`` (``(tenant, task_id)`` each) marked for cancelling (the
        once-a-second check)."""

    @abc.abstractmethod
    def ended_of(self, runs: list) -> set:
        """The task ids of ``runs`` (``(tenant, task_id)`` each) whose stored state is final
        (another replica may have ended a run of this one: its sweep took it for dead)."""

    @abc.abstractmethod
    def heartbeat(self) -> None:
        """Renew this replica's liveness."""

    @abc.abstractmethod
    def sweep(self, max_age_secs: float, text: str) -> list:
        """End FAILED (``text``) the runs of dead replicas and runs older than
        ``max_age_secs``; return the task ids ended."""


class LocalReplicas(ReplicaStore):
    """One process: no other replica to hear from, nothing to sweep."""

    def __init__(self, tasks):
        self._tasks = tasks

    def listen_cancels(self, callback, lost=None):
        """Nothing to listen to: a cancel mark is set in this process."""

    def cancel_marks(self, runs):
        return {task_id for tenant, task_id in runs
                if self._tasks.cancel_marked(task_id, tenant=tenant)}

    def ended_of(self, runs):
        return set()

    def heartbeat(self):
        """Nothing to renew."""

    def sweep(self, max_age_secs, text):
        return []
