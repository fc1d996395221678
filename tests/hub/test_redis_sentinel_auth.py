"""Sentinels that ask for a password of their own (``requirepass`` in sentinel.conf), before
a primary that asks for another: ``redis-sentinel://:PRIMARY@HOSTS/SERVICE/DB?sentinel_password=…``.

A real set (tests/redis_topologies.py) with both passwords: the hub serves through it and
after a failover the sentinels call themselves; without the sentinels' password, or with a
wrong one, each call answers -32603 and no log line holds either password.
"""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.config import load_config
from murmur_wsgi.hub.config_schema import ConfigError
from murmur_wsgi.hub.store.redis_client import public_url
from murmur_wsgi.hub.store.sentinel_url import parse
from tests.hub.sentinel_util import answers_unavailable, serves_across_a_failover
from tests.redis_sentinels import SentinelSet

pytestmark = pytest.mark.one_store

PRIMARY = "primary-pw-never-logged"
WATCHERS = "sentinel-pw-never-logged"
SETTINGS = {"liveness_secs": 0.3, "sweep_interval_secs": 0.1, "timeout_secs": 1.0,
            "wait_replicas": 1}


@pytest.fixture
def guarded_set(tmp_path):
    started = SentinelSet(tmp_path / "sentinel", down_after_ms=500, quick=True,
                          password=PRIMARY, sentinel_password=WATCHERS).start()
    yield started
    started.stop_soon()


def test_the_query_names_the_sentinels_user_and_password_and_nothing_else():
    parts = parse("redis-sentinel://:p@h:1/murmur/0?sentinel_username=watch"
                  "&sentinel_password=s%26cret")
    assert (parts.password, parts.sentinel_username, parts.sentinel_password) == \
        ("p", "watch", "s&cret")
    assert parse("redis-sentinel://h:1/murmur/0").sentinel_password is None
    assert public_url("redis-sentinel://:p@h:1/m/0?sentinel_password=s%26cret") == \
        "redis-sentinel://***@h:1/m/0?sentinel_password=***"
    for bad in ["redis-sentinel://h:1/m/0?password=never-echoed",
                "redis-sentinel://h:1/m/0?sentinel_password=never-echoed&sentinel_password=x"]:
        with pytest.raises(ConfigError) as refused:
            load_config({"store": bad})
        assert "store" in str(refused.value) and "sentinel_password" in str(refused.value)
        assert "never-echoed" not in str(refused.value)


def test_a_hub_asks_sentinels_with_their_password_and_follows_a_failover(guarded_set,
                                                                          caplog):
    serves_across_a_failover(guarded_set, SETTINGS)
    assert PRIMARY not in caplog.text and WATCHERS not in caplog.text


@pytest.mark.parametrize("query", ["", "?sentinel_password=wrong-" + WATCHERS])
def test_sentinels_asked_without_their_password_answer_32603(guarded_set, query, caplog):
    answers_unavailable(guarded_set.url.partition("?")[0] + query, SETTINGS)
    assert caplog.text and PRIMARY not in caplog.text and WATCHERS not in caplog.text
