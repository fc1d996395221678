"""The session: one per process, holding its tasks, events, tokens and agent."""
from __future__ import annotations

import logging
import threading
import time

from murmur_wsgi.session.ids import new_id
from murmur_wsgi.tasks.store import TaskStore

logger = logging.getLogger(__name__)


class Delegations:
    """Delegations a task of this session waits on (filled by the completions work)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._waiting: dict[str, object] = {}       # guarded by _lock

    def awaits(self, delegation_id: str) -> bool:
        with self._lock:
            return delegation_id in self._waiting

    def complete(self, call):
        from murmur_wsgi.errors import CompletionNotAwaitedError
        raise CompletionNotAwaitedError(call.environ.get("HTTP_X_MURMUR_DELEGATION_ID"))


class Session:
    """What one door answers for: ``ses_`` id, start time, tasks, closing flag."""

    def __init__(self, manifest, session_id: str | None = None):
        self.id = session_id or new_id("ses")
        self.manifest = manifest
        self.started_at = time.time()
        tasks = manifest.tasks
        self.store = TaskStore(tasks["keep_finished"], tasks["keep_finished_secs"])
        self.delegations = Delegations()
        self.closing = False
