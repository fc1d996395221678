"""``/metrics`` is a page to GET (or HEAD), an operator's JWT only; any other method there
is answered as a path the hub does not serve. Before, a POST, PUT or DELETE was answered
the page."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from werkzeug.test import Client

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.metrics import MULTIPROC_ENV

from tests.hub.conftest import close_hub, hub_config, token


@pytest.fixture
def metered():
    hub = create_hub(hub_config(metrics={"enabled": True}))
    yield Client(hub)
    close_hub(hub)


def _answer(response) -> tuple:
    return response.status_code, sorted(response.headers.items()), response.get_data()


REPO = Path(__file__).resolve().parents[2]
OPERATOR = {"Authorization": f"Bearer {token(role='operator')}"}


def test_the_page_is_got_and_headed(metered):
    page = metered.get("/metrics", headers=OPERATOR)
    assert page.status_code == 200 and b"murmur_hub_requests" in page.get_data()
    head = metered.head("/metrics", headers=OPERATOR)
    assert head.status_code == 200 and head.get_data() == b""
    assert head.headers["Content-Length"] == page.headers["Content-Length"]


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_another_method_is_a_path_the_hub_does_not_serve(metered, method):
    unserved = _answer(metered.open("/nowhere", method=method, headers=OPERATOR))
    assert unserved[0] == 404
    assert _answer(metered.open("/metrics", method=method, headers=OPERATOR)) == unserved


TWO_HUBS = """
import json
from werkzeug.test import Client
from murmur_wsgi.hub import create_hub
from tests.hub.conftest import KEY_A, close_hub, hub_config, send_params

hubs = [create_hub(hub_config(metrics={"enabled": True})) for _ in range(2)]
for hub, sends in zip(hubs, (3, 2)):
    client = Client(hub)
    for _ in range(sends):
        client.post("/a2a/v1/agents/echo", headers={"X-API-Key": KEY_A, "A2A-Version": "1.0"},
                    json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                          "params": send_params("counted")}).close()
print(hubs[1].metrics.render().decode())
for hub in hubs:
    close_hub(hub)
"""


def test_two_hubs_of_one_process_add_up_in_multiprocess_mode(tmp_path):
    """prometheus_client's multiprocess mode (what ``murmur-wsgi hub`` and a host's own
    gunicorn set): each value object writes its slot of the process's file from its own
    copy, so two hubs embedded in one process wrote over each other's counts: 3 runs on
    one and 2 on the other read 2. A process of its own: the mode is chosen when
    prometheus_client is imported."""
    env = {**os.environ, MULTIPROC_ENV: str(tmp_path), "PYTHONPATH": str(REPO)}
    page = subprocess.run([sys.executable, "-c", TWO_HUBS], env=env, cwd=REPO, timeout=60,
                          capture_output=True, text=True, check=True).stdout
    assert "murmur_hub_runs_total 5.0" in page.splitlines(), page
    assert 'murmur_hub_requests_total{method="SendMessage"} 5.0' in page.splitlines(), page
