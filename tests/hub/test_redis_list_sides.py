"""ListTasks on Redis when ``statusTimestampAfter`` meets a ``contextId`` or a ``status``:
each page walks the fewest of the three sides (the tasks changed since, those not, the other
filters' set), and its pages are a plain filter of the tasks.

The tasks are made by the store's own ``create``, finished at once, their status times set
(a few milliseconds apart, many alike), each agent's its own: the pages are compared with
the tasks' own contexts, states and times, filtered in Python and ordered by creation,
newest first; Redis's command counts (INFO commandstats, on a cluster the node of the
tenant's slot) show how many ids a page asked their scores (``ZMSCORE``, by
``SCORE_BATCH``).
"""
from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis import RedisCluster

from murmur_wsgi.hub.store import redis_index, redis_stores
from murmur_wsgi.hub.store.pages import encode_token
from murmur_wsgi.hub.store.redis_keys import tenant_prefix
from murmur_wsgi.hub.task import HubTask
from murmur_wsgi.wire.task import CANCELED, COMPLETED, FAILED, REJECTED

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

BASE_MS = 1_800_000_000_000
CONTEXTS = ("c0", "c1", "c2")
STATES = (COMPLETED, FAILED, REJECTED, CANCELED)
AGENTS = itertools.count()


@pytest.fixture
def redis_tasks(redis_server):
    redis_server.flush()
    found = redis_stores(redis_server.url, timeout_secs=5.0, replica_id="me")
    yield found.tasks
    found.close()


@pytest.fixture
def zmscores(redis_server):
    """ZMSCORE calls so far on the Redis that holds the tenant's keys."""
    client = redis_server.client()
    counted = client.get_node_from_key(tenant_prefix("acme")).redis_connection \
        if isinstance(client, RedisCluster) else client
    yield lambda: counted.info("commandstats").get("cmdstat_zmscore", {}).get("calls", 0)
    client.close()


def _fill(store, tasks) -> tuple[str, list]:
    """``tasks`` (context, state, ms past BASE_MS) made on an agent of their own; returns it
    and each task's (seq, id, context, state, status ms)."""
    agent = f"a{next(AGENTS)}"
    made = []
    for context, state, ms in tasks:
        message_id = uuid.uuid4().hex
        task = HubTask(uuid.uuid4().hex, context, "acme", agent, message_id,
                       {"messageId": message_id, "role": "ROLE_USER", "parts": []})
        task.set_state(state, None)
        task.status_ms = BASE_MS + ms
        store.create(task, task.task_event(), bind=False)
        made.append((task.seq, task.id, context, state, task.status_ms))
    return agent, made


def _pages(store, agent, page_size, **filters) -> list:
    """Every page of a listing: its ids, totalSize and token."""
    pages, token = [], None
    while True:
        page = store.list("acme", agent, page_size=page_size, token=token, **filters)
        pages.append(([task.id for task in page.tasks], page.total, page.next_token))
        token = page.next_token
        if not token:
            return pages


def _model(made, page_size, context_id=None, state=None, after_ms=None) -> list:
    """The same pages of a plain filter of the tasks, newest first by creation."""
    kept = sorted((seq, task_id) for seq, task_id, context, task_state, ms in made
                  if context_id in (None, context) and state in (None, task_state)
                  and (after_ms is None or ms > after_ms))[::-1]
    pages = []
    for start in range(0, max(len(kept), 1), page_size):
        chunk = kept[start:start + page_size]
        more = start + page_size < len(kept)
        pages.append(([task_id for _, task_id in chunk], len(kept),
                      encode_token(chunk[-1][0]) if more else ""))
    return pages


tasks = st.lists(st.tuples(st.sampled_from(CONTEXTS), st.sampled_from(STATES),
                           st.integers(0, 9)), max_size=40)
queries = st.lists(st.fixed_dictionaries({
    "context_id": st.none() | st.sampled_from(CONTEXTS + ("none",)),
    "state": st.none() | st.sampled_from(STATES),
    "after": st.integers(-1, 10),
    "page_size": st.integers(1, 7),
}), min_size=1, max_size=4)


@given(tasks=tasks, queries=queries)
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_pages_are_a_plain_filter_of_the_tasks(redis_tasks, monkeypatch, tasks, queries):
    """Any tasks, any filters with ``statusTimestampAfter`` (before every task, after every
    one, and at times many of them share): every page, token and totalSize is the model's,
    whichever side the page walks (ZMSCORE by 3 here, so by several batches)."""
    monkeypatch.setattr(redis_index, "SCORE_BATCH", 3)
    agent, made = _fill(redis_tasks, tasks)
    for query in queries:
        filters = {"context_id": query["context_id"], "state": query["state"],
                   "after_ms": BASE_MS + query["after"]}
        assert _pages(redis_tasks, agent, query["page_size"], **filters) == \
            _model(made, query["page_size"], **filters), query


def test_each_page_asks_the_fewest_side(redis_tasks, zmscores, monkeypatch):
    """60 tasks, 57 COMPLETED and 3 FAILED, one a millisecond. A status that 57 match with
    every task changed since, or all but the 5 oldest: the page is the status's own, less
    those not changed since, each asked its place in the status once (1 ZMSCORE by 10, or
    none), not the 55 or 57 of either other side (6). The 3 FAILED are asked their status
    times, and the 4 changed since the 56 oldest their place in COMPLETED: 1 each."""
    monkeypatch.setattr(redis_index, "SCORE_BATCH", 10)
    agent, made = _fill(redis_tasks, [("c0", FAILED if i % 20 == 7 else COMPLETED, i)
                                      for i in range(60)])
    for state, after, total, asked in ((COMPLETED, -1, 57, 0), (COMPLETED, 4, 52, 1),
                                       (FAILED, 4, 3, 1), (COMPLETED, 55, 4, 1)):
        filters = {"state": state, "after_ms": BASE_MS + after}
        before = zmscores()
        first = redis_tasks.list("acme", agent, page_size=20, **filters)
        assert (zmscores() - before, first.total) == (asked, total), (state, after)
        pages = _pages(redis_tasks, agent, 20, **filters)
        assert pages == _model(made, 20, **filters)
        assert pages[0][0] == [task.id for task in first.tasks]
