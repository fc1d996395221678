"""A hub with push on, on a Redis store that is down (one Redis, or a Redis Cluster): each
background loop (the replica's, the event listener's, push's dispatcher) logs one line as
the outage starts and one as it ends, never a line (nor a traceback) per retry. Each store
is real, on a reserved port that nothing listens on until the test starts it.
"""
from __future__ import annotations

import collections
import logging

import pytest

from murmur_wsgi.hub import create_hub, replica
from murmur_wsgi.hub.push import dispatcher
from murmur_wsgi.hub.store import redis_feed
from tests.hub.conftest import FAST, close_hub, wait_until
from tests.hub.push_util import push_config
from tests.redis_topologies import Cluster
from tests.redis_util import RedisServer

pytestmark = pytest.mark.one_store

RETRY_SECS = 0.1                # the loops' pauses (the replica's tick), for the test
# A beat every third tick, a sweep every ninth: the ticks between reach no store (no task
# runs).
REDIS = dict(FAST, liveness_secs=9 * RETRY_SECS, sweep_interval_secs=9 * RETRY_SECS)
# Each loop's retry, as its store call logs it (at DEBUG once the outage is logged).
RETRIES = ("heartbeat failed", "the event channel failed", "push_due failed")
ENDS = ("the hub's store answers again", "the event channel is back",
        "the dispatcher reads the store again")


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record) -> None:
        self.records.append(record)

    def count(self, text: str) -> int:
        return sum(text in r.getMessage() for r in list(self.records))

    def lines(self) -> collections.Counter:
        """The hub's lines at WARNING and above, each line's text counted."""
        return collections.Counter(r.getMessage() for r in list(self.records)
                                   if r.levelno >= logging.WARNING)


@pytest.fixture
def records():
    handler = Records()
    hub_logger = logging.getLogger("murmur_wsgi.hub")
    level = hub_logger.level
    hub_logger.addHandler(handler)
    hub_logger.setLevel(logging.DEBUG)
    yield handler
    hub_logger.removeHandler(handler)
    hub_logger.setLevel(level)


@pytest.mark.parametrize("kind", ["redis", "cluster"])
def test_each_loop_logs_an_outage_once_as_it_starts_and_once_as_it_ends(
        kind, tmp_path, records, monkeypatch):
    monkeypatch.setattr(redis_feed, "RECONNECT_SECS", RETRY_SECS)
    monkeypatch.setattr(dispatcher, "IDLE_WAIT_SECS", RETRY_SECS)
    monkeypatch.setattr(replica, "TICK_SECS", RETRY_SECS)
    store = RedisServer(tmp_path) if kind == "redis" else Cluster(tmp_path / "cluster", size=1)
    config = push_config()
    config.update(store=store.url, redis=REDIS)
    hub = create_hub(config)
    try:
        # Each loop retried a couple of times while the store is down.
        wait_until(lambda: all(records.count(text) >= 3 for text in RETRIES))
        down = records.lines()
        assert not [r for r in records.records if r.exc_info], "a traceback was logged"
        assert all(n == 1 for n in down.values()), down
        assert not any(records.count(text) for text in ENDS), down     # not up yet
        assert len(down) <= 5, down         # a line a loop, and a cluster's at the start

        store.start()
        wait_until(lambda: all(records.count(text) for text in ENDS))
        up = records.lines()
        assert all(records.count(text) == 1 for text in ENDS), up
        assert all(n == 1 for n in up.values()), up
        assert not [r for r in records.records if r.exc_info], "a traceback was logged"
    finally:
        close_hub(hub)
        store.stop()
