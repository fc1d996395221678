"""Delegations (``dlg_…``): a live task waits on one; a completion delivers its payload.

The completion itself is a method (``methods/completions.py``): this module
holds only who waits on what.

Concurrency:
    Guarded by the store's lock. A waiting agent waits on its task's
    ``runtime.cond`` (on that lock), which a completion, a cancel, a change
    of the task and the session's close all notify.

Memory:
    Only live tasks' delegations are held: a delegation and its completion
    not yet taken stay while their task lives (a wait that timed out may be
    waited on again), and the task's end drops them all (``drop_locked``).
"""
from __future__ import annotations

import logging

from murmur_wsgi.agents.base import TaskCanceled
from murmur_wsgi.errors import CompletionNotAwaitedError
from murmur_wsgi.ids import new_id

logger = logging.getLogger(__name__)


class Delegations:
    """The delegations the session's live tasks wait on."""

    def __init__(self, session):
        self._session = session
        self._lock = session.store.lock
        self._waiting: dict = {}            # guarded by _lock: dlg id -> the task's record
        self._arrived: dict[str, str] = {}  # guarded by _lock: dlg id -> payload not yet taken

    def expect(self, record) -> str:
        """Register a delegation the task will wait on; return its ``dlg_…`` id."""
        delegation_id = new_id("dlg")
        with self._lock:
            runtime = record.runtime
            if runtime is None or runtime.cancelled:
                raise TaskCanceled(record.id)
            self._waiting[delegation_id] = record
        return delegation_id

    def drop_locked(self, record) -> None:
        """The task ended: forget its delegations and their completions (lock held)."""
        for delegation_id in [d for d, rec in self._waiting.items() if rec is record]:
            del self._waiting[delegation_id]
            self._arrived.pop(delegation_id, None)

    def _awaited_locked(self, delegation_id: str):
        record = self._waiting.get(delegation_id)
        if record is None or record.terminal or record.runtime is None \
                or self._session.closing or delegation_id in self._arrived:
            return None
        return record

    def awaits(self, delegation_id: str) -> bool:
        """True when a live task waits on ``delegation_id`` and the session is not ending."""
        with self._lock:
            return self._awaited_locked(delegation_id) is not None

    def deliver(self, delegation_id: str, payload: str) -> str:
        """Hand a completion's text to the task waiting on it; return the task's context.

        Raises:
            CompletionNotAwaitedError: the task ended, or was answered, meanwhile.
        """
        with self._lock:
            record = self._awaited_locked(delegation_id)
            if record is None:
                raise CompletionNotAwaitedError(delegation_id)
            self._arrived[delegation_id] = payload
            record.runtime.cond.notify_all()
            return record.context_id

    def wait(self, record, delegation_id: str, timeout: float | None) -> str | None:
        """Wait for the completion's payload; None past ``timeout``; TaskCanceled on cancel."""
        session = self._session
        with self._lock:
            runtime = record.runtime
            if runtime is None:
                raise TaskCanceled(record.id)
            runtime.cond.wait_for(lambda: delegation_id in self._arrived or runtime.cancelled
                                  or session.closing, timeout)
            payload = self._arrived.pop(delegation_id, None)
            if payload is not None:
                self._waiting.pop(delegation_id, None)
                return payload
            if runtime.cancelled or session.closing:
                raise TaskCanceled(record.id)
            return None
