"""hub.yaml's keys re-read while the hub runs (hub/keys.py): a file edited into a shape the
hub cannot read, or would not start with, keeps the keys it had, with a warning once, and
every request still answers."""
from __future__ import annotations

import json
import logging
import os

import pytest
import yaml

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub import keys as keys_module
from murmur_wsgi.hub.keys import MAX_FILE_BYTES, KeyWatcher

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


def _with_acme_keys(keys) -> dict:
    """The hub's own config, acme's api_keys replaced: a file it would start with."""
    config = json.loads(json.dumps(hub_config()))
    config["tenants"]["acme"]["api_keys"] = keys
    return config


def _cut_short() -> str:
    """The hub's own config as YAML, cut before its last tenant (a write half done)."""
    text = yaml.safe_dump(_with_acme_keys([sha(NEW_KEY)]), sort_keys=False)
    last = list(hub_config()["tenants"])[-1]
    return text[:text.index(f"  {last}:")]


@pytest.mark.parametrize("text", [
    pytest.param(yaml.safe_dump({"tenants": {"acme": {"api_keys": 5}}}), id="a-number"),
    pytest.param(yaml.safe_dump({"tenants": {"acme": {"api_keys": True}}}), id="a-boolean"),
    pytest.param("tenants: " + "{a: " * 2000 + "}" * 2000, id="nested-past-recursion"),
    # NOTE: the next four dropped every key (or a tenant's) without a word: the file was
    # read as holding none. The hub would not start with any of them.
    pytest.param("", id="empty"),
    pytest.param(_cut_short(), id="cut-short"),
    pytest.param(yaml.safe_dump(_with_acme_keys([NEW_KEY])), id="a-key-not-its-digest"),
    pytest.param(yaml.safe_dump({"tenants": {"acme": {"api_keys": [sha(NEW_KEY)]}}}),
                 id="one-tenant-left"),
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
    # NOTE: read once a change: the same file was parsed again at every beat, in the
    # requests that presented keys (a 4.4 MB one held the worker 3.9 s each time).
    assert caplog.text.count("keeping the keys") == 1
    path.write_text(yaml.safe_dump(_with_acme_keys([sha(NEW_KEY)])))
    assert _card(hub, KEY_A).status_code == 401             # readable again: it counts
    assert _card(hub, NEW_KEY).status_code == 200


def test_a_file_over_the_bound_keeps_the_keys_unread(watched, caplog):
    hub, path = watched
    text = yaml.safe_dump(_with_acme_keys([sha(NEW_KEY)]))
    path.write_text(text + "#" * (MAX_FILE_BYTES - len(text)) + "\n")
    with caplog.at_level(logging.WARNING, logger="murmur_wsgi.hub.keys"):
        assert _card(hub, KEY_A).status_code == 200
        assert _card(hub, NEW_KEY).status_code == 401
    assert f"is over {MAX_FILE_BYTES} bytes" in caplog.text


def test_a_file_rewritten_in_place_under_the_same_stamp_is_read_again(watched, monkeypatch):
    # NOTE: a file that could not be read is read again every RETRY_SECS, stamp or not: a
    # rewrite in place of the same size within the clock's tick keeps the stamp.
    monkeypatch.setattr(keys_module, "RETRY_SECS", 0.0)
    hub, path = watched
    good = yaml.safe_dump(_with_acme_keys([sha(NEW_KEY)]))
    broken = "tenants: {{{" + " " * (len(good) - len("tenants: {{{"))
    path.write_text(broken)
    assert _card(hub, KEY_A).status_code == 200                 # could not be read: kept
    stamp = os.stat(path)
    with open(path, "r+", encoding="utf-8") as fh:              # in place, same size
        fh.write(good)
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))   # and the same stamp
    assert _card(hub, NEW_KEY).status_code == 200
    assert _card(hub, KEY_A).status_code == 401
