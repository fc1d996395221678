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
and only the page's records are read. ``statusTimestampAfter`` is a
``ZRANGEBYSCORE`` on ``upd`` (the tasks changed since: usually few) whose ids
are kept when they are in the other filters' set (``ZMSCORE``: scores, no
record), or, when that set is the smaller, its ids kept when ``upd`` scores
them past the time: the page's records are still the only ones read, and
``totalSize`` is the count of those ids.
"""
from __future__ import annotations

from murmur_wsgi.hub.store.base import Page
from murmur_wsgi.hub.store.pages import decode_token, encode_token
from murmur_wsgi.hub.store.redis_keys import both_key, index_key, state_key, updated_key

SCORE_BATCH = 1000               # ids per ZMSCORE when ListTasks combines filters


class RedisIndex:
    """ListTasks' pages from the sorted sets; ``load(tenant, ids)`` reads the page's
    records."""

    def __init__(self, client, load):
        self._redis = client
        self._load = load

    def list(self, tenant, agent, *, context_id=None, state=None, after_ms=None, page_size=50,
             token=None):
        before = decode_token(token) if token else None
        if after_ms is not None and state is None and context_id is None:
            pipe = self._redis.pipeline(transaction=False)
            pipe.zcount(updated_key(tenant, agent), f"({after_ms}", "+inf")
            pipe.zcard(index_key(tenant, agent))
            matching, every = pipe.execute()
            if matching == every:
                after_ms = None            # every task changed since: no filter at all
        if after_ms is None:
            # One sorted set holds exactly the tasks asked for, in the pages' order.
            key = self._set_of(tenant, agent, context_id, state)
            pipe = self._redis.pipeline(transaction=False)
            pipe.zrevrangebyscore(key, f"({before}" if before is not None else "+inf", "-inf",
                                  start=0, num=page_size + 1)
            pipe.zcard(key)
            ids, total = pipe.execute()
            page = self._load(tenant, ids[:page_size])
            more = len(ids) > page_size
            return Page(page, encode_token(page[-1].seq) if more and page else "", total)
        matches = sorted(self._matches(tenant, agent, context_id, state, after_ms), reverse=True)
        below = [task_id for seq, task_id in matches if before is None or seq < before]
        page = self._load(tenant, below[:page_size])
        more = len(below) > page_size
        return Page(page, encode_token(page[-1].seq) if more and page else "", len(matches))

    @staticmethod
    def _set_of(tenant, agent, context_id, state) -> str:
        """The sorted set of the tasks matching ``context_id`` and ``state`` (each or None)."""
        if state is None:
            return index_key(tenant, agent, context_id)
        if context_id is None:
            return state_key(tenant, agent, state)
        return both_key(tenant, agent, state, context_id)

    def _matches(self, tenant, agent, context_id, state, after_ms) -> list:
        """``(seq, id)`` of every task changed after ``after_ms`` and in the set of the other
        filters (scores, no record read). The smaller side is read whole and the other asked
        for those ids' scores: a small context among many tasks changed since costs its own
        few, and many changed among few of a status the same."""
        changed_key = updated_key(tenant, agent)
        within = self._set_of(tenant, agent, context_id, state)
        pipe = self._redis.pipeline(transaction=False)
        pipe.zcount(changed_key, f"({after_ms}", "+inf")
        pipe.zcard(within)
        changed, held = pipe.execute()
        if held < changed:                      # the filter's set, each id's status time asked
            pairs = self._redis.zrange(within, 0, -1, withscores=True)
            ids, seqs = [task_id for task_id, _ in pairs], [seq for _, seq in pairs]
            asked, kept = changed_key, lambda ms: ms is not None and ms > after_ms
        else:                                   # the tasks changed since, each one's seq asked
            ids = self._redis.zrangebyscore(changed_key, f"({after_ms}", "+inf")
            seqs, asked, kept = None, within, lambda seq: seq is not None
        matches = []
        for start in range(0, len(ids), SCORE_BATCH):
            batch = ids[start:start + SCORE_BATCH]
            for i, (task_id, score) in enumerate(zip(batch, self._redis.zmscore(asked, batch)),
                                                 start):
                if kept(score):
                    matches.append((int(score if seqs is None else seqs[i]), task_id))
        return matches
