"""ListTasks on Redis: sorted sets that hold the tasks a page asks for, in the pages' order.

Per agent, among its tenant's keys (``murmur:{t:<tenant>}:``, one slot: a
listing's pipeline goes to one node), scored by the task's creation number
``seq`` (newest first is highest first): ``idx:<agent>`` every task,
``ctx:<agent>:<contextId>`` a context's, ``st:<agent>:<state>`` those in one
state, ``cst:<agent>:<state>:<contextId>`` a context's in one state; and
``upd:<agent>``, every task scored by its status time (ms). The
scripts that create a task and change its state keep them (``redis_scripts``),
and retention's ``forget`` takes a task out of each.

A page with no filter, a ``contextId``, a ``status`` or both is one
``ZREVRANGEBYSCORE … LIMIT`` and a ``ZCARD`` on one set: O(log n + page),
and only the page's records are read. With ``statusTimestampAfter`` the matches are the
other filters' set (every task's set when there is none) less the tasks ``upd`` scores at
or before the time, and one round trip counts the three (``ZCOUNT``, ``ZCARD``s) to walk
the fewest, never more than O(the smallest of them) ids read:

- the tasks not changed since (the usual case of an early time, none when it is before
  them all): their ids, asked their place in the set (``ZMSCORE``: scores, no record); the
  page is the set's own, ``ZREVRANGEBYSCORE … LIMIT`` past as many more as it holds of
  those, and ``totalSize`` its ``ZCARD`` less them;
- the tasks changed since (the usual case of a recent time), asked their place in the set;
- the set, each id asked its status time in ``upd``.

Of the last two, the page is the matches' newest (``heapq.nlargest``), ``totalSize`` their
count. Each case reads only the page's records. The round trips are not one step (a
cluster takes no transaction): a task created or changed between them is counted as one of
them found it. The intersection is not left to Redis: a
``ZRANGESTORE`` of 100,000 ids changed since and its ``ZINTERSTORE`` held Redis, every
tenant's, for 265 ms in one script, and a script walking the set in chunks took 2.4 µs of
Redis a task (docs/performance.md).
"""
from __future__ import annotations

import heapq

from murmur_wsgi.hub.held import LARGE_CHARS
from murmur_wsgi.hub.store.base import Page, first_within
from murmur_wsgi.hub.store.pages import decode_token, encode_token
from murmur_wsgi.hub.store.redis_keys import both_key, index_key, state_key, updated_key

SCORE_BATCH = 1000               # ids per ZMSCORE when ListTasks combines filters


class RedisIndex:
    """ListTasks' pages from the sorted sets; ``load(tenant, ids)`` reads the page's
    records, ``sizes(tenant, ids)`` their stored forms' sizes first when a page is bounded
    in bytes; a large page's records are read within ``reads`` (``large_reads``)."""

    def __init__(self, client, load, sizes, reads):
        self._redis = client
        self._load = load
        self._sizes = sizes
        self._reads = reads

    def list(self, tenant, agent, *, context_id=None, state=None, after_ms=None, page_size=50,
             token=None, max_bytes=None):
        before = decode_token(token) if token else None
        within = self._set_of(tenant, agent, context_id, state)
        if after_ms is None:
            return self._page_of(tenant, within, before, page_size, max_bytes)
        changed_key = updated_key(tenant, agent)
        pipe = self._redis.pipeline(transaction=False)
        pipe.zcount(changed_key, f"({after_ms}", "+inf")
        pipe.zcard(changed_key)
        pipe.zcard(within)
        changed, every, held = pipe.execute()
        if every - changed <= min(changed, held):
            # PERF: the fewest are those not changed since: the set's own page, less them.
            left_out = self._left_out(within, changed_key, after_ms) if every > changed else {}
            return self._page_of(tenant, within, before, page_size, max_bytes, left_out)
        matches = self._matches(within, changed_key, after_ms, changed, held)
        # PERF: the matches come about oldest first (by seq, or by status time): newest first,
        # the heap's least is seldom replaced (38 ms for 50,000 oldest first, 3 ms so).
        older = matches if before is None else [match for match in matches if match[0] < before]
        newest = heapq.nlargest(page_size + 1, reversed(older))
        window = newest[:page_size]
        page, taken = self._within(tenant, [task_id for _, task_id in window], max_bytes)
        more = taken < len(window) or len(newest) > page_size
        return Page(page, encode_token(window[taken - 1][0]) if more else "", len(matches))

    @staticmethod
    def _set_of(tenant, agent, context_id, state) -> str:
        """The sorted set of the tasks matching ``context_id`` and ``state`` (each or None)."""
        if state is None:
            return index_key(tenant, agent, context_id)
        if context_id is None:
            return state_key(tenant, agent, state)
        return both_key(tenant, agent, state, context_id)

    def _page_of(self, tenant, key, before, page_size, max_bytes, left_out=None) -> Page:
        """The page of ``key``'s tasks older than ``before`` (a seq, or None), but those of
        ``left_out`` (id: seq): ``totalSize`` is the set's count less them."""
        left_out = left_out or {}
        skipped = sum(1 for seq in left_out.values() if before is None or seq < before)
        pipe = self._redis.pipeline(transaction=False)
        pipe.zrevrangebyscore(key, f"({before}" if before is not None else "+inf", "-inf",
                              start=0, num=page_size + 1 + skipped, withscores=True)
        pipe.zcard(key)
        scored, total = pipe.execute()
        if left_out:
            scored = [pair for pair in scored if pair[0] not in left_out]
        window = scored[:page_size]
        page, taken = self._within(tenant, [task_id for task_id, _ in window], max_bytes)
        more = taken < len(window) or len(scored) > page_size
        return Page(page, encode_token(int(window[taken - 1][1])) if more else "",
                    max(total - len(left_out), 0))

    def _within(self, tenant, ids: list, max_bytes) -> tuple[list, int]:
        """The records of the first ``ids`` whose stored forms fit ``max_bytes`` (at least
        one; None: every one), and how many of ``ids`` the page took: the sizes are read
        first, and no record past them; a large page once the worker has room for it
        (many pages read at once were each a copy of their own).

        NOTE: the next page starts after the ids taken, not after the last record read: a
        record left out (forgotten since the index was read, or unreadable: ``_load``)
        ended the listing when it was the page's last, every older task unreachable."""
        if max_bytes is None or not ids:
            return self._load(tenant, ids), len(ids)
        sizes = self._sizes(tenant, ids)
        count = first_within(sizes, max_bytes)
        size = sum(sizes[:count])
        if size <= LARGE_CHARS:
            return self._load(tenant, ids[:count]), count
        with self._reads.room(size, tenant):
            return self._load(tenant, ids[:count]), count

    def _left_out(self, within, changed_key, after_ms) -> dict:
        """``{id: seq}`` of ``within``'s tasks not changed after ``after_ms``: the tasks not
        changed since are read (few: at most as many as either other side), each asked its
        place in ``within``."""
        unchanged = self._redis.zrangebyscore(changed_key, "-inf", after_ms)
        return {task_id: int(seq) for task_id, seq in self._scores(within, unchanged)
                if seq is not None}

    def _matches(self, within, changed_key, after_ms, changed, held) -> list:
        """``(seq, id)`` of every task changed after ``after_ms`` and in ``within`` (scores, no
        record read), of the smaller side read whole and the other asked for those ids'
        scores: a small context among many tasks changed since costs its own few, and many
        changed among few of a status the same."""
        if held < changed:                      # the filter's set, each id's status time asked
            pairs = self._redis.zrange(within, 0, -1, withscores=True)
            times = self._scores(changed_key, [task_id for task_id, _ in pairs])
            return [(int(seq), task_id) for (task_id, seq), (_, ms) in zip(pairs, times)
                    if ms is not None and ms > after_ms]
        ids = self._redis.zrangebyscore(changed_key, f"({after_ms}", "+inf")
        return [(int(seq), task_id) for task_id, seq in self._scores(within, ids)
                if seq is not None]

    def _scores(self, key, ids):
        """``(id, score or None)`` of each of ``ids`` in ``key``, ``SCORE_BATCH`` at a time."""
        for start in range(0, len(ids), SCORE_BATCH):
            batch = ids[start:start + SCORE_BATCH]
            yield from zip(batch, self._redis.zmscore(key, batch))
