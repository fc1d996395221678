"""What a run's agent writes (``RunWrites``, a part of ``runs.Run``): its streamed text,
progress, named artifacts and usage; stored, streamed and counted.

Each write is made under the run's lock (``runs.Run``'s concurrency notes), counted
against ``limits.max_output_bytes`` (``run_end.count_output``), stored (merged: at most one
stored event of text every ``events.merge_secs``, ``_flush_locked``) and handed to the
run's own stream (``live``); out of the lock, the agent's thread then gives way now and
then (murmur_wsgi/turns.py), and an inline run's first turn arms its run timeout.
"""
from __future__ import annotations

import threading
import time

from murmur_wsgi.agents.endings import AgentValueError, TaskCanceled
from murmur_wsgi.turns import turn
from murmur_wsgi.agents.usage import RunUsage
from murmur_wsgi.hub.live import MERGE_TOKENS
from murmur_wsgi.hub.run_end import OutputPassed, count_output, end_passed
from murmur_wsgi.hub.run_text import Carried, joined
from murmur_wsgi.hub.task import (ANSWER, artifact_event, artifact_update, progress_status,
                                  status_update)
from murmur_wsgi.wire.encode import utf8_bytes
from murmur_wsgi.wire.task import text_part

# The most streamed text one stored event carries: an agent writing faster than the merge
# stores pieces of this, never one event of all it wrote (each stream replaying the task's
# log holds the event it writes whole).
STORED_CHARS = 256 * 1024


# The signal of a run that closed before anyone waited for it (``wait_closed``).
_CLOSED = threading.Event()
_CLOSED.set()


class RunWrites:
    """The agent's side of ``runs.Run``: its fields are ``Run``'s, under its lock."""

    # --- the agent's side ----------------------------------------------------

    def wait(self, predicate, timeout: float) -> bool:
        """Wait up to ``timeout`` for ``predicate()`` (read under the lock) about this run."""
        changed = self.changed
        with changed:
            return changed.wait_for(predicate, timeout)

    def wait_closed(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the run to close (``_close_locked`` done), without its
        lock: a store round trip under the lock (the end's flush of unstored text, the
        slot's release) holds the lock, not this wait (CancelTask's).

        The signal is one slot, taken without the lock (``dict.setdefault``, atomic): the
        first to come puts its own there, a waiter a new event, the close one set already
        (``_CLOSED``); the close sets whichever it finds."""
        return self.__dict__.setdefault("_closed_signal", threading.Event()).wait(timeout)

    def _signal_closed(self) -> None:
        """The run has closed: wake ``wait_closed`` (now or to come)."""
        self.__dict__.setdefault("_closed_signal", _CLOSED).set()

    def wait_stop(self, seconds: float) -> bool:
        return self.wait(lambda: self.stopping, seconds)

    def on_stop(self, waker) -> None:
        """Call ``waker()`` once the run must stop (now if it must already)."""
        with self.lock:
            if not self.stopping:
                self._wakers.append(waker)
                return
        waker()

    def add_usage(self, report: tuple, most: int) -> None:
        """Add one checked usage report; AgentValueError if a count would pass ``most``,
        or a model new to the run would pass ``limits.max_usage_models``."""
        try:
            with self.lock:
                usage = self.usage
                if usage is None:
                    usage = self.usage = RunUsage()
                if usage.check_room(report[3], self.max_models, "limits.max_usage_models"):
                    count_output(self, utf8_bytes(report[3] or ""))
                totals = usage.totals
                if max(totals.input_tokens + report[0], totals.output_tokens + report[1],
                       totals.cached_tokens + report[2]) > most:
                    raise AgentValueError(f"usage: more than {most} tokens in one count")
                usage.add(*report)
        except OutputPassed:
            end_passed(self)
            raise
        self._turn()

    def publish_artifact(self, artifact: dict, append: bool, last: bool) -> None:
        """One of the agent's named artifacts (``ctx.artifacts``): stored, streamed, kept."""
        if artifact["artifactId"] == ANSWER:
            raise ValueError(f"artifact name {ANSWER!r} is the hub's own; choose another")
        try:
            with self.lock:
                if self.ending:
                    raise TaskCanceled(self.task_id)
                self._flush_locked()
                payload = artifact_event(self.task_id, self.context_id, artifact, append, last)
                count_output(self, utf8_bytes(payload))
                name = artifact["artifactId"]
                kept = self.artifacts.get(name)
                if kept is None or not append:
                    if kept is not None:
                        del self.artifacts[name]
                    self.artifacts[name] = dict(artifact, parts=list(artifact["parts"]))
                else:
                    kept["parts"].extend(artifact["parts"])
                self._published_locked(payload)
        except OutputPassed:
            end_passed(self)
            raise
        self._turn()

    def token(self, text: str) -> None:
        if not isinstance(text, str) or not text:
            return
        runs = self.runs
        try:
            with self.lock:
                if self.ending:
                    raise TaskCanceled(self.task_id)
                count_output(self, utf8_bytes(text))
                self.tokens.append(text)
                self._loose += 1
                if self._loose >= MERGE_TOKENS:         # the newest tokens, joined in a block
                    self.tokens[-MERGE_TOKENS:] = ["".join(self.tokens[-MERGE_TOKENS:])]
                    self._loose = 0
                if self.live is not None:
                    self.live.token(text)
                due = self.last_flush + runs.merge_secs - time.monotonic()
                if due <= 0:
                    self._flush_locked()
                elif self._flush_timer is None:
                    self._flush_timer = runs.timer(due, self._flush)
                self._notify_locked()
        except OutputPassed:
            end_passed(self)
            raise
        self._turn()

    def progress(self, text: str) -> None:
        try:
            with self.lock:
                if self.ending:
                    raise TaskCanceled(self.task_id)
                self._flush_locked()
                payload = status_update(self.task_id, self.context_id,
                                        progress_status(self.task_id, self.context_id, text))
                count_output(self, utf8_bytes(payload))
                self._published_locked(payload)
        except OutputPassed:
            end_passed(self)
            raise
        self._turn()

    def _published_locked(self, payload: str) -> None:
        """Store the agent's event ``payload`` and hand it to the run's own stream;
        TaskCanceled when storing it found the task ended elsewhere."""
        self._appended(payload)
        if self.ending:
            raise TaskCanceled(self.task_id)
        self._live(payload)

    def _turn(self) -> None:
        """After one of the agent's writes, out of the lock: give way now and then
        (murmur_wsgi/turns.py). An inline run's first turn arms its run timeout (``start``),
        from the run's start: a timer can fire now that the agent gives way."""
        ends = self._turn_ends
        self._turn_ends = turn(ends)
        since = self._untimed_since
        if since is not None and ends and self._turn_ends != ends:
            self._untimed_since = None
            self._arm_timeout(self.timeout - (time.monotonic() - since))

    def _live(self, payload: str) -> None:
        if self.live is not None:
            self.live.event(payload)
        self._notify_locked()

    def _live_text(self, text: str, append: bool) -> str:
        """A piece of the answer's text on the run's own stream."""
        return artifact_update(self.task_id, self.context_id, [text_part(text)],
                               append=append, last=False)

    def _live_state(self) -> tuple[list[str], str]:
        """The task as it stands, for a reader that fell behind: its named artifacts whole,
        and the answer's text so far."""
        return ([artifact_event(self.task_id, self.context_id, artifact, False, False)
                 for artifact in self.artifacts.values()], joined(self.tokens))

    def _merge_unstored(self) -> list[str]:
        """Join the tokens not yet stored into entries of at most ``STORED_CHARS``; their
        texts (each to be one stored event)."""
        text = "".join(self.tokens[self.stored:])
        pieces = [text[at:at + STORED_CHARS] for at in range(0, len(text), STORED_CHARS)]
        self.tokens[self.stored:] = pieces
        self._loose = 0
        return pieces

    def _flush(self) -> None:
        runs = self.runs
        with self.lock:
            self._flush_timer = None
            if self.ending or self.stored == len(self.tokens):
                return
            due = self.last_flush + runs.merge_secs - time.monotonic()
            if due > 0:
                # NOTE: this timer ran late and a token stored the rest meanwhile: the
                # tokens since wait their turn (at most one stored event per merge_secs).
                self._flush_timer = runs.timer(due, self._flush)
            else:
                self._flush_locked()

    def _flush_locked(self) -> None:
        """Store the tokens not yet stored as artifactUpdates of at most ``STORED_CHARS``
        each; a store that fails (or events kept before them) keeps them unstored, not lost:
        the next flush stores them, or the end's answer carries them whole (``finish``)."""
        if self.stored < len(self.tokens) and self.kept.idle:
            tokens, at = self.tokens, self.stored
            # MEMORY: only a store that keeps this very event in the worker (memory.py's
            # log) makes it the run's copy for free; a shared store's (Redis) is gone once
            # sent, and the event is its text with its escapes (up to six characters each).
            carried = not self.runs.store.shared
            for text in self._merge_unstored():
                payload = artifact_update(self.task_id, self.context_id, [text_part(text)],
                                          append=self.stored_any, last=False)
                self.kept.add(payload)
                # NOTE: refused, the event stays kept under its number (it may have been
                # written, its answer lost): sent again as it is, it is written once.
                self.stored_any = True
                if carried:
                    tokens[at] = Carried(payload, len(text))     # MEMORY: run_text.py
                at += 1
            self.stored = len(tokens)
            self._store_kept_locked()
        self.last_flush = time.monotonic()
