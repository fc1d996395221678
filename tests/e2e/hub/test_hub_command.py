"""``murmur-wsgi hub`` as a user runs it: the card follows ``--public-url``, a wrong
loopback port is one warning line."""
from __future__ import annotations

import sys
import time

import yaml

import pytest

from tests.e2e.conftest import START_DEADLINE, child_env, free_port, spawn, stop_process, \
    wait_served
from tests.e2e.hub_process import PREFIX

pytestmark = pytest.mark.e2e

KEY = "mhk_dev-acme-change-me"          # conf/hub.yaml's key for trying the hub


def test_public_url_flag_keeps_the_card_right(tmp_path):
    port = free_port()
    listen = f"127.0.0.1:{port}"
    log = tmp_path / "hub.log"
    proc = spawn([sys.executable, "-m", "murmur_wsgi.cli", "hub", "--config", "conf/hub.yaml",
                  "--listen", listen, "--public-url", f"http://{listen}"], log, child_env())
    try:
        card = wait_served(proc, f"http://{listen}{PREFIX}echo/.well-known/agent-card.json",
                           time.monotonic() + START_DEADLINE, "the hub",
                           lambda: log.read_text(), {"X-API-Key": KEY}).json()
    finally:
        stop_process(proc, 30, "the hub", lambda: log.read_text())
    assert card["supportedInterfaces"][0]["url"] == f"http://{listen}{PREFIX}echo"
    assert "warning" not in log.read_text()


def test_a_listen_port_the_card_does_not_name_warns_in_one_line(tmp_path):
    port = free_port()
    listen = f"127.0.0.1:{port}"
    with open("conf/hub.yaml", encoding="utf-8") as fh:
        announced = yaml.safe_load(fh)["public_url"]
    log = tmp_path / "hub.log"
    proc = spawn([sys.executable, "-m", "murmur_wsgi.cli", "hub", "--config", "conf/hub.yaml",
                  "--listen", listen], log, child_env())
    try:
        wait_served(proc, f"http://{listen}{PREFIX}echo/.well-known/agent-card.json",
                    time.monotonic() + START_DEADLINE, "the hub", lambda: log.read_text(),
                    {"X-API-Key": KEY})
    finally:
        stop_process(proc, 30, "the hub", lambda: log.read_text())
    warnings = [line for line in log.read_text().splitlines() if "warning" in line]
    assert warnings == [f"murmur-wsgi: warning: public_url {announced} names port 41880, but "
                        f"the hub listens on {listen}: its cards send clients elsewhere; give "
                        f"--public-url http://{listen} (or set MURMUR_HUB_PUBLIC_URL)"]
