"""Each application's gunicorn worker freezes its boot's objects out of the cyclic GC's walks.

The server runs with ``tests/gunicorn_gc_probe.py`` (the application's own gunicorn
settings, plus hooks that write the collector's figures at the worker's first request:
nothing in the application reads them). The first request is the card its start waits for.
"""
from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import REPO, launch
from tests.e2e.hub.test_hub_e2e import KEY, hub_yaml
from tests.e2e.hub_process import HubProcess

pytestmark = pytest.mark.e2e

PROBE_CONF = str(REPO / "tests" / "gunicorn_gc_probe.py")
# NOTE: before, nothing was frozen and a full collection walked the whole boot: about
# 44,000 objects on the hub, 41,600 on the door. Frozen, a few hundred are left.
FROZEN_AT_LEAST = 10_000
TRACKED_AT_MOST = 5_000


def boot_figures(tmp_path) -> dict:
    """The figures the worker wrote at its first request."""
    lines = (tmp_path / "gc.jsonl").read_text(encoding="utf-8").splitlines()
    return next(json.loads(line)["boot"] for line in lines if '"boot"' in line)


def hub(tmp_path, env: dict):
    return HubProcess(tmp_path, hub_yaml, agent="echo", key=KEY, workers=1, env=env,
                      gunicorn_conf=PROBE_CONF)


def door(tmp_path, env: dict):
    return launch(tmp_path, env=env, gunicorn_conf=PROBE_CONF)


@pytest.mark.parametrize("start", [hub, door])
def test_a_full_collection_in_the_worker_walks_none_of_its_boot(tmp_path, start):
    server = start(tmp_path, {"GC_PROBE_OUT": str(tmp_path / "gc.jsonl"),
                              "GC_PROBE_APP": start.__name__})
    try:
        boot = boot_figures(tmp_path)
    finally:
        server.stop_soon()
    assert boot["frozen"] >= FROZEN_AT_LEAST, boot
    assert boot["tracked"] <= TRACKED_AT_MOST, boot
