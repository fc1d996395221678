"""The session: one per process, holding its tasks, events, background work and agent."""
from __future__ import annotations

import logging
import threading
import time

from murmur_wsgi.door.session.delegations import Delegations
from murmur_wsgi import logs
from murmur_wsgi.ids import new_id
from murmur_wsgi.door.session.trace import Trace
from murmur_wsgi.door.tasks.works import BackgroundWorks
from murmur_wsgi.door.tasks.manager import TaskManager
from murmur_wsgi.door.tasks.ring import Event, EventRing, Lagged
from murmur_wsgi.door.tasks.store import TaskStore

logger = logging.getLogger(__name__)

WATCH_WAKE_SECS = 60.0       # the after_task watcher's wait; publish() and close() wake it sooner


class Session:
    """What one door answers for: ``ses_`` id, tasks, events, background work, closing flag."""

    def __init__(self, manifest, agent, session_id: str | None = None, trace: bool = False):
        self.id = session_id or new_id("ses")
        self.manifest = manifest
        # What its records are cut to, in its requests' threads and its tasks'.
        self.log_field_chars = manifest.observability.get("log_field_chars", logs.FIELD_CHARS)
        self.started_at = time.time()
        self.closing = False
        self.agent = agent
        self.trace = Trace(self.id, enabled=trace)     # trace.jsonl; a no-op when disabled
        tasks, stream = manifest.tasks, manifest.stream
        self.store = TaskStore(tasks["keep_finished"], tasks["keep_finished_secs"],
                               keep_finished_total=tasks["keep_finished_total"],
                               keep_bytes=tasks["keep_finished_bytes"],
                               keep_bytes_total=tasks["keep_finished_bytes_total"])
        self.ring = EventRing(stream["replay_events"], stream["reader_queue"],
                              lock=self.store.lock, max_bytes=stream["replay_bytes"],
                              take_bytes=stream["pending_bytes"])
        shell = manifest.capabilities["shell"]
        self.works = BackgroundWorks(shell["allow"], shell["max_running"],
                                    shell["max_command_bytes"])
        self.delegations = Delegations(self)
        self.manager = TaskManager(self, agent, self.ring, self.works)

    def open_streams(self) -> int:
        """Streams open on the event log right now (the door's own watcher not counted)."""
        return self.ring.streams

    def when_first_task_ends(self, callback) -> None:
        """Call ``callback()`` once, on its own thread, after the first task ends.

        ``lifecycle.after_task: exit``. The thread reads the event log until
        the first terminal status (a rejected task never ran, so has none);
        it ends without calling back when the session closes first. Its records
        (the door's closing) are cut to the door's bound.
        """
        reader = self.ring.reader(frames=False, stream=False)

        def watch():
            logs.APP_BOUND.set(self.log_field_chars)
            ended = False
            try:
                while not ended:
                    items, closed = reader.next(WATCH_WAKE_SECS)
                    ended = any(type(item) is Event and item.terminal for item in items)
                    if not ended and any(type(item) is Lagged for item in items):
                        # The terminal event may be among those missed: ask the store.
                        ended = any(record.terminal for record in self.store.snapshot())
                    if closed and not ended:
                        return
            finally:
                reader.close()
            callback()

        threading.Thread(target=watch, daemon=True, name=f"after-task-{self.id}").start()

    def close(self) -> None:
        """End the session: wake held requests, close every stream, kill background work."""
        if self.closing and self.ring.closed:
            return
        self.manager.close()
        self.ring.close()
        self.works.kill_all()
        try:
            close_agent = getattr(self.agent, "close", None)
            if close_agent is not None:
                close_agent()      # a HarnessAgent ends the harness processes still running
        except Exception:  # noqa: BLE001 - an agent's close is its code: the session still ends
            logger.exception("the agent's close failed; the session closes all the same")
        self.trace.close()
