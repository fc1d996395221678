"""hub.yaml's keys re-read while the hub runs (hub/keys.py): a file edited into a shape the
hub cannot read keeps the keys it had, with a warning, and every request still answers."""
from __future__ import annotations

import logging

import pytest
import yaml

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.keys import KeyWatcher

from tests.hub.conftest import KEY_A, HubClient, close_hub, hub_config, sha

pytestmark = pytest.mark.one_store          # the file only: nothing a store keeps

NEW_KEY = "mhk_tenant-a-minted-later"


@pytest.fixture
def watched(tmp_path):
    """A hub whose keys follow ``path`` at every request (no 2 s beat)."""
    hub = create_hub(hub_config())
    path = tmp_path / "hub.yaml"
    watcher = KeyWatcher(hub.credentials, str(path), hub.config.tenants, every=0)
    hub.credentials.refresh = watcher.refresh
    yield hub, path
    close_hub(hub)


def _card(hub, key):
    return HubClient(hub, "echo", {"X-API-Key": key}).card()


@pytest.mark.parametrize("text", [
    pytest.param(yaml.safe_dump({"tenants": {"acme": {"api_keys": 5}}}), id="a-number"),
    pytest.param(yaml.safe_dump({"tenants": {"acme": {"api_keys": True}}}), id="a-boolean"),
    pytest.param("tenants: " + "{a: " * 2000 + "}" * 2000, id="nested-past-recursion"),
])
def test_a_file_the_hub_cannot_read_keeps_the_keys(watched, caplog, text):
    # NOTE: before, each re-read raised (TypeError, RecursionError) out of the request that
    # ran it: the card answered -32603 "Internal error", with a traceback in the log.
    hub, path = watched
    path.write_text(text)
    with caplog.at_level(logging.WARNING, logger="murmur_wsgi.hub.keys"):
        for _ in range(3):
            response = _card(hub, KEY_A)
            assert (response.status_code, response.get_json()["name"]) == (200, "echo")
    assert "keeping the keys" in caplog.text and "Traceback" not in caplog.text
    path.write_text(yaml.safe_dump({"tenants": {"acme": {"api_keys": [sha(NEW_KEY)]}}}))
    assert _card(hub, KEY_A).status_code == 401             # readable again: it counts
    assert _card(hub, NEW_KEY).status_code == 200
