"""A task's event log as the memory store keeps it, once the task has ended.

A finished task's log is a tuple of its payloads (its events numbered from 1, the last
ending it: ``stored``): texts, None for a refused task's first event (rendered from its
wire form when read), or tuples.

MEMORY: a finished task's wire form holds its message (its history) and its answer (its
last artifact), and its log held each of them again: its first event, ``{"task": …}`` as
it was created, its message, and its answer's final chunk the answer's JSON. A 1 MB text
echoed by the demo was four texts of about 1 MB each, twice its wire form. Once the task
has ended, such an event is kept as its texts around its place in the wire form
(``quoted``): a tuple of texts and ``start, stop`` pairs (integers: the collector tracks
none of it). A reader gets its text, made at each read (``text_of``): kept, it would be
that copy again. An event is quoted only where the wire form holds exactly its text; any
other (a streamed chunk, a short one) is kept as it is.
"""
from __future__ import annotations

from murmur_wsgi.hub.store.base import StoredEvent
from murmur_wsgi.wire.stream import task_event

# An event given in pieces (``TaskStore.end``: a long answer's final chunk around its JSON)
# is kept in them from this many characters; a shorter one as one text.
PIECES_CHARS = 64 * 1024


def stored(log: list | tuple, after: int) -> list:
    """The events of ``log`` after its first ``after``: a running task's StoredEvents as
    they are; a finished task's payloads (a tuple: its events numbered from 1, the last
    ending it) as StoredEvents."""
    if type(log) is not tuple:
        return log[after:]
    last = len(log)
    return [StoredEvent(n, log[n - 1], n == last) for n in range(after + 1, last + 1)]


def kept_form(payload: str | tuple) -> str | tuple:
    """An event as a finished task's log keeps it: one text, or a long one's pieces.

    MEMORY: a long answer's final chunk stays the run's pieces, its middle the answer's
    JSON the run encoded (``end``'s ``answer``), then as its place in the task's wire form
    (``quoted``). A short one is joined: a tuple and its texts take more than one text."""
    if isinstance(payload, str) or sum(map(len, payload)) >= PIECES_CHARS:
        return payload
    return "".join(payload)


QUOTE_CHARS = PIECES_CHARS       # a shorter part of an event is kept as it is
_HISTORY = ',"history":'         # the wire form's last member (``HubTask._pieces``)
_TASK = '{"task":'               # a first event (``wire.stream.task_event``)
_SAME_CHARS = 64 * 1024          # two texts compared this many characters at a time


def quoted(log: tuple, wire: str, arts_end: int, answer: str | None,
           ended: int | None = None) -> tuple:
    """A finished task's ``log`` (its payloads, ``stored``) with its first event's
    history and its events' pieces that are ``answer`` kept as their place in ``wire``,
    the task's wire form, whose artifacts end at ``arts_end`` (its record's shape).

    PERF: ``ended``, how many of its last events its end wrote (the only ones in pieces;
    None: any): the events between the first and those are kept as they are, not looked
    at one by one under the store's lock (a look at each took the end of a task of
    300,000 streamed tokens 1.6 times as long)."""
    history = arts_end + len(_HISTORY) if wire.startswith(_HISTORY, arts_end) else -1
    at = arts_end - 1 - len(answer) if answer is not None else -1
    answered = at >= 0 and len(answer) >= QUOTE_CHARS and wire.startswith(answer, at)
    start = 1 if ended is None else max(1, len(log) - ended)
    tail = log[start:]
    if answered:
        tail = tuple(_quoted_pieces(entry, answer, at) if type(entry) is tuple else entry
                     for entry in tail)
    return (_quoted_history(log[0], wire, history), *log[1:start], *tail)


def _quoted_pieces(entry: tuple, answer: str, at: int) -> tuple:
    """An event in pieces (``kept_form``) with ``answer`` (``is``) as its place."""
    out: list = []
    for piece in entry:
        out.extend((at, at + len(answer)) if piece is answer else (piece,))
    return tuple(out)


def _quoted_history(entry, wire: str, history: int):
    """A first event with its history's text but its closing bracket (a history that grew
    later holds it so too) as its place in ``wire``, whose history starts at ``history``."""
    if type(entry) is not str or history < 0 or len(entry) < QUOTE_CHARS or \
            not entry.startswith(_TASK) or not entry.endswith("]}}"):
        return entry
    begin = entry.find(_HISTORY)
    if begin < 0:
        return entry
    begin += len(_HISTORY)
    count = len(entry) - 3 - begin
    if count < QUOTE_CHARS or history + count > len(wire) or \
            not _same(entry, begin, wire, history, count):
        return entry
    return entry[:begin], history, history + count, entry[begin + count:]


def _same(text: str, at: int, other: str, start: int, count: int) -> bool:
    """Whether ``text`` from ``at`` and ``other`` from ``start`` hold the same ``count``
    characters (compared a slice at a time: no copy of either whole)."""
    for offset in range(0, count, _SAME_CHARS):
        size = min(_SAME_CHARS, count - offset)
        if text[at + offset:at + offset + size] != \
                other[start + offset:start + offset + size]:
            return False
    return True


def text_of(payload, wire: str) -> str:
    """A finished task's kept event as its text: a text as it is; None (a refused task's
    first) rendered from ``wire``, its wire form; pieces joined, a place in ``wire`` (two
    integers) as the text it holds there."""
    if type(payload) is str:
        return payload
    if payload is None:
        return task_event(wire)
    pieces, at, count = [], 0, len(payload)
    while at < count:
        piece = payload[at]
        if type(piece) is int:
            pieces.append(wire[piece:payload[at + 1]])
            at += 2
        else:
            pieces.append(piece)
            at += 1
    return "".join(pieces)
