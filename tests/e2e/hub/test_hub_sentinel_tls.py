"""A real ``murmur-wsgi hub`` (gunicorn -k gevent, its store checked before the fork) on
``store: rediss-sentinel://…?ssl_ca_certs=…``: sentinels, primary and replica on TLS only
(tests/redis_sentinels.py), verified against the URL's CA through gevent's ``ssl``.
"""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.store.redis_keys import task_key
from tests.e2e.hub_replicas import Replica, send, state, until
from tests.redis_sentinels import SentinelSet
from tests.tls_util import Authority

pytestmark = pytest.mark.e2e
TENANT = "acme"                 # tests/e2e/hub_replicas.py's


def test_a_gunicorn_hub_serves_through_tls_sentinels(tmp_path):
    sentinels = SentinelSet(tmp_path / "sentinel", quick=True,
                            tls=Authority(tmp_path / "tls", "sentinel-ca")).start()
    hub = None
    try:
        hub = Replica(tmp_path, sentinels.url)
        task = send(hub, "0.05")                 # ticks for 50 ms, then completes
        assert until(lambda: state(hub, task["id"]) == "TASK_STATE_COMPLETED")
        primary = sentinels.primary.client()         # verified against the CA too
        assert primary.exists(task_key(TENANT, task["id"])) == 1
    finally:
        if hub is not None:
            hub.stop_soon()
        sentinels.stop_soon()
