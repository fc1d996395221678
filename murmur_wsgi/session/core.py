"""The session: one per process, holding its tasks, events, background work and agent."""
from __future__ import annotations

import logging
import threading
import time

from murmur_wsgi.session.ids import new_id
from murmur_wsgi.session.trace import Trace
from murmur_wsgi.session.works import BackgroundWorks
from murmur_wsgi.tasks.manager import TaskManager
from murmur_wsgi.tasks.ring import EventRing
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
    """What one door answers for: ``ses_`` id, tasks, events, background work, closing flag."""

    def __init__(self, manifest, agent, session_id: str | None = None, trace: bool = False):
        self.id = session_id or new_id("ses")
        self.manifest = manifest
        self.started_at = time.time()
        self.closing = False
        self.agent = agent
        self.trace = Trace(self.id, enabled=trace)     # trace.jsonl; a no-op when disabled
        tasks, stream = manifest.tasks, manifest.stream
        self.store = TaskStore(tasks["keep_finished"], tasks["keep_finished_secs"])
        self.ring = EventRing(stream["replay_events"], stream["reader_queue"])
        self.works = BackgroundWorks(manifest.capabilities["shell"]["allow"])
        self.delegations = Delegations()
        self.manager = TaskManager(self, agent, self.ring, self.works)

    def close(self) -> None:
        """End the session: wake held requests, close every stream, kill background work."""
        if self.closing and self.ring.closed:
            return
        self.manager.close()
        self.ring.close()
        self.works.kill_all()
        close_agent = getattr(self.agent, "close", None)
        if close_agent is not None:
            close_agent()          # a HarnessAgent ends the harness processes still running
