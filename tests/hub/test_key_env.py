"""``hub key`` when the hub reads its tenants from ``MURMUR_HUB_TENANTS``, not hub.yaml."""
from __future__ import annotations

import pytest

from murmur_wsgi.cli import main

TENANTS = "{t: {api_keys: [], agents: {a: {agent: demo}}}}"
WITH_TENANTS = "tenants:\n  t:\n    api_keys: []\n    agents:\n      a: {agent: demo}\n"


@pytest.mark.parametrize("text", [WITH_TENANTS, "public_url: http://x.io\n"])
@pytest.mark.parametrize("action", [[], ["--revoke", "a" * 12]])
def test_a_key_is_not_changed_in_a_file_the_hub_does_not_read_for_its_tenants(
        tmp_path, capsys, monkeypatch, text, action):
    """NOTE: before, with the tenant in both, the digest went into hub.yaml and the key
    was printed (exit 0), though the hub (its start and its re-read of the keys alike)
    takes the whole tenants block from the variable: a key that never worked. With no
    tenants in hub.yaml, an AttributeError's traceback."""
    monkeypatch.setenv("MURMUR_HUB_TENANTS", TENANTS)
    path = tmp_path / "hub.yaml"
    path.write_text(text)
    assert main(["hub", "key", "t", "--config", str(path), *action]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and path.read_text() == text
    assert captured.err.startswith("murmur-wsgi: MURMUR_HUB_TENANTS is set: the hub reads "
                                   "its tenants and their api_keys from it")
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize("text", ["public_url: http://x.io\n",
                                  "tenants:\n  t:\n    api_keys: [%s]\n" % ("c" * 64)])
def test_the_keys_are_listed_from_the_variable(tmp_path, capsys, monkeypatch, text):
    """Each key is named by where the hub reads it: the variable, not hub.yaml (which
    lists another key, or none)."""
    monkeypatch.setenv("MURMUR_HUB_TENANTS", "{t: {api_keys: [%s]}}" % ("b" * 64))
    path = tmp_path / "hub.yaml"
    path.write_text(text)
    assert main(["hub", "key", "t", "--config", str(path), "--list"]) == 0
    assert capsys.readouterr().out == "b" * 64 + "  MURMUR_HUB_TENANTS\n"
