"""A run's own stream (SendStreamingMessage): the events its reader has not taken yet.

The backlog holds ready events (status updates, named artifacts, the end)
and the streamed tokens since the reader's last take. A reader that keeps up
(at most ``SPLIT_TOKENS`` tokens behind) gets each token as its own
artifactUpdate; one further behind gets them merged, as artifactUpdates of at
most ``PIECE_CHARS`` characters each, never one event per token (the backlog
itself joins its tokens every ``MERGE_TOKENS``). It is bounded in bytes
(``stream.live_backlog_bytes``): a reader that falls that far behind is
*lagged*: what it missed is dropped, and its next take starts with the task
as it stands instead, as a subscriber would read it from the store's merged
events: the latest status, each named artifact whole and the answer's text so
far (``append: false``), then live again. A take hands over at most about
``budget`` bytes, so no batch (and no write) is larger than that.

Concurrency:
    Every method is called with its run's lock held: the
    agent's thread adds, the stream's reader takes.
"""
from __future__ import annotations

import logging
from collections import deque

logger = logging.getLogger(__name__)

PIECE_CHARS = 64 * 1024          # the most text one live artifactUpdate carries
TAKE_BYTES = 256 * 1024          # about the most one take hands over (the SSE chunk size)
MERGE_TOKENS = 1024              # pending tokens are joined into one string this often
SPLIT_TOKENS = 16                # a reader at most this many tokens behind gets each alone


def _is_status(payload: str) -> bool:
    return payload.startswith('{"statusUpdate"')


class _Text:
    """Streamed text not taken yet; ``reset``: its first piece replaces the answer's text.

    ``parts`` are the tokens, the older ones joined in blocks of ``MERGE_TOKENS``; ``at``
    is how much of the first part was taken already (a long part is never copied whole).
    """

    __slots__ = ("parts", "at", "loose", "size", "reset", "counted")

    def __init__(self, reset: bool = False, counted: bool = True):
        self.parts: deque = deque()
        self.at = 0
        self.loose = 0              # tokens at the end not joined yet
        self.size = 0
        self.reset = reset
        self.counted = counted

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        self.loose += 1
        if self.loose >= MERGE_TOKENS:
            block = [self.parts.pop() for _ in range(MERGE_TOKENS)]
            block.reverse()
            self.parts.append("".join(block))
            self.loose = 0

    def take(self, chars: int, across: bool) -> str:
        """Take up to ``chars`` characters off: of the first token only, or ``across`` them."""
        out = []
        need = chars
        while need and self.parts:
            part = self.parts[0]
            left = len(part) - self.at
            if left <= need:
                out.append(part[self.at:] if self.at else part)
                self.parts.popleft()
                self.at = 0
                need -= left
            else:
                out.append(part[self.at:self.at + need])
                self.at += need
                need = 0
            if not across:
                break
        self.loose = min(self.loose, len(self.parts))
        piece = "".join(out)
        self.size -= len(piece)
        return piece


class LiveBacklog:
    """The events of one run's own stream not taken yet, at most ``limit`` bytes of them.

    Args:
        limit: the bytes of events and text the backlog keeps for a slow reader.
        render: ``render(text, append)``: the answer's artifactUpdate of ``text``.
        state: ``state()``: the task as it stands, ``(artifact events, the answer's
            text so far)``, for a lagged reader.
        name: what the log calls the stream (its task's id).
    """

    def __init__(self, limit: int, render, state, name: str = ""):
        self.name = name
        self.limit = limit
        self._render = render
        self._state = state
        # str payloads, (payload,) for the task as it stands (not counted), or _Text
        self._entries: deque = deque()
        self._final: list[str] = []         # the end's events, after everything else
        self.bytes = 0                      # counted bytes in _entries
        self.lagged = 0                     # how many times the reader fell behind
        self._behind = False                # lagged, and not yet resynchronised
        self._status: str | None = None     # the latest status update missed while behind
        self._answer_begun = False          # this stream has sent the answer's text
        self.ended = False

    # --- the run's side ----------------------------------------------------

    def event(self, payload: str) -> None:
        """A ready event (a status update, a named artifact)."""
        if self._behind:
            if _is_status(payload):
                self._status = payload
            return
        self._entries.append(payload)
        self._grew(len(payload))

    def token(self, text: str) -> None:
        if self._behind:
            return                          # the answer's text so far covers it
        last = self._entries[-1] if self._entries else None
        if not isinstance(last, _Text) or not last.counted:
            last = _Text()
            self._entries.append(last)
        last.add(text)
        self._grew(len(text))

    def end(self, payloads: list[str]) -> None:
        """The end's events: taken after everything before them, never dropped."""
        self._final.extend(payloads)
        self.ended = True

    def _grew(self, size: int) -> None:
        # NOTE: counted in characters, a byte each for the ASCII of JSON and of most
        # streamed text (a str of wider characters takes up to 4 bytes for each).
        self.bytes += size
        if self.bytes > self.limit:
            self._lag()

    def _lag(self) -> None:
        statuses = [e for e in self._entries if isinstance(e, str) and _is_status(e)]
        self._status = statuses[-1] if statuses else None
        self._entries.clear()
        self.bytes = 0
        self._behind = True
        self.lagged += 1
        logger.info("task %s: its stream's reader fell %d bytes behind; it continues from "
                    "the task as it stands", self.name, self.limit)

    # --- the reader's side -------------------------------------------------

    def pending(self) -> bool:
        return bool(self._entries or self._final or self._behind)

    def take(self, budget: int = TAKE_BYTES) -> list[str]:
        """The next events, about ``budget`` bytes of them (at least one when any)."""
        if self._behind:
            self._resync()
        out: list[str] = []
        size = 0
        entries = self._entries
        while entries and (size < budget or not out):
            entry = entries[0]
            if not isinstance(entry, _Text):
                entries.popleft()
                if isinstance(entry, tuple):
                    entry = entry[0]            # the task as it stands: not counted
                else:
                    self.bytes -= len(entry)
                out.append(entry)
                size += len(entry)
                continue
            chars = min(PIECE_CHARS, max(1, budget - size))
            append = self._answer_begun and not entry.reset
            piece = entry.take(chars, across=len(entry.parts) > SPLIT_TOKENS)
            entry.reset = False
            if entry.counted:
                self.bytes -= len(piece)
            if not entry.size:
                entries.popleft()
            out.append(self._render(piece, append))
            self._answer_begun = True
            size += len(piece)
        if not entries and self._final:
            out.extend(self._final)
            self._final = []
        return out

    def _resync(self) -> None:
        """The task as it stands, in place of what a lagged reader missed."""
        self._behind = False
        artifacts, text = self._state()
        if self._status is not None:
            self._entries.append(self._status)
            self._status = None
        self._entries.extend((payload,) for payload in artifacts)
        if text:
            entry = _Text(reset=True, counted=False)
            entry.add(text)
            self._entries.append(entry)
