"""Ctrl-C on ``make run`` / ``make hub``: SIGINT to the whole process group (the arbiter
and its workers, as a terminal sends it) stops both applications with no traceback, and a
hub worker with ``auth.jwt`` set prints no MonkeyPatchWarning."""
from __future__ import annotations

import hashlib
import os
import signal

import pytest

from tests.e2e.conftest import launch
from tests.e2e.hub_process import HubProcess

pytestmark = pytest.mark.e2e

STOP = 30.0
KEY = "mhk_e2e-ctrl-c"


def ctrl_c(proc, log) -> str:
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=STOP) == 0, log()
    return log()


def test_ctrl_c_stops_the_door_quietly(tmp_path):
    door = launch(tmp_path)
    try:
        text = ctrl_c(door.proc, door.log)
    finally:
        door.stop(timeout=10)
    assert "Traceback" not in text and "SystemExit" not in text
    assert "Shutting down: Master" in text


def test_ctrl_c_stops_the_hub_quietly(tmp_path):
    def config(port):
        return {"public_url": f"http://127.0.0.1:{port}",
                "auth": {"jwt": {"secret": "e2e-ctrl-c-secret-" + "z" * 24}},
                "tenants": {"acme": {"api_keys": [hashlib.sha256(KEY.encode()).hexdigest()],
                                     "agents": {"echo": {"agent": "demo", "publish": True}}}}}
    hub = HubProcess(tmp_path, config, agent="echo", key=KEY)
    try:
        text = ctrl_c(hub.proc, hub.log)
    finally:
        if hub.proc.poll() is None:
            hub.kill()
    assert "Traceback" not in text and "SystemExit" not in text
    assert "MonkeyPatchWarning" not in text
    assert "Shutting down: Master" in text
