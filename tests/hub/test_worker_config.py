"""The hub's worker takes its read deadlines from the hub.yaml it serves."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config import ConfigError, load_config

from tests.hub.conftest import close_hub, hub_config


def test_the_deadlines_default_to_the_doors():
    limits = load_config(hub_config(), environ={}).limits
    assert (limits["header_timeout_secs"], limits["body_timeout_secs"]) == (10, 30)


def test_the_hub_worker_reads_its_deadlines_from_hub_yaml():
    gevent_worker = pytest.importorskip("murmur_wsgi.hub.worker")
    config = hub_config(limits={"run_timeout_secs": 30, "header_timeout_secs": 2.5,
                                "body_timeout_secs": 7})
    hub = create_hub(config)
    try:
        worker = gevent_worker.HubWorker.__new__(gevent_worker.HubWorker)
        assert worker.deadlines() == (2.5, 7)
    finally:
        close_hub(hub)


@pytest.mark.parametrize("key", ["header_timeout_secs", "body_timeout_secs"])
def test_a_deadline_must_be_positive(key):
    with pytest.raises(ConfigError, match=key):
        load_config(hub_config(limits={key: 0}), environ={})


def test_a_deadline_is_not_a_tenants_to_override():
    config = hub_config()
    config["tenants"]["acme"]["limits"] = {"header_timeout_secs": 1}
    with pytest.raises(ConfigError, match="header_timeout_secs"):
        load_config(config, environ={})
