"""A SubscribeToTask stream on Redis whose batch holds the log's trim inside it (not at
its start) must not go on past the gap in silence: the batch is cut at the gap, and the
next read meets the trim at its start (the stored Task first). With today's settings such
a batch does not come (a read past a trim is a full page, which pushes every event before
it out of the task's buffer); this holds if those numbers change."""
from __future__ import annotations

from types import SimpleNamespace

from murmur_wsgi.hub.methods.streams import EventSource
from murmur_wsgi.hub.store.base import StoredEvent
from murmur_wsgi.hub.store.redis_watched import Watched


def ev(seq: int) -> StoredEvent:
    return StoredEvent(seq, f'{{"statusUpdate":{{"n":{seq}}}}}', False)


def test_a_watched_buffer_can_hand_over_a_batch_with_a_gap_inside():
    """How such a batch comes: the buffer (one read for every stream of the task) read
    1..7, then, the log trimmed past 7 meanwhile, 300 and 301; a stream that read 5 (a
    second stream of the task, two events behind) is handed 6, 7, 300, 301."""
    watched = Watched(1, None)
    watched.merge(0, [ev(i) for i in range(1, 8)])
    watched.merge(7, [ev(300), ev(301)])
    assert watched.covers(5, 1)
    assert [e.seq for e in watched.since(5)] == [6, 7, 300, 301]


class _Store:
    shared = False

    def __init__(self, batches):
        self._batches = list(batches)

    def events(self, task_id, after, timeout, tenant=None, finished=False):
        # NOTE: once the batches are read, the log as it stands: trimmed to 300 on
        batch = self._batches.pop(0) if self._batches else [ev(300), ev(301)]
        return [e for e in batch if e.seq > after], True

    def get(self, tenant, agent, task_id):
        return SimpleNamespace(terminal=False)

    def render(self, task, as_read=True):
        return '{"id":"t","stored":true}'


def test_a_gap_inside_a_batch_goes_on_from_the_stored_task():
    store = _Store([[ev(i) for i in range(1, 6)], [ev(6), ev(7), ev(300), ev(301)]])
    source = EventSource(store, SimpleNamespace(tenant="t", agent="a", id="t1", terminal=False))
    sent = []
    for _ in range(4):
        batch, done = source.read(0)
        sent += batch
    at = next(i for i, p in enumerate(sent) if '"n":300' in p)
    assert sent[at - 1].startswith('{"task":'), sent      # the stored Task before the gap's end
    assert sum('"n":300' in p for p in sent) == 1          # and no event twice
