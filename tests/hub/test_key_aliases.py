"""``hub key`` on a hub.yaml whose tenants share YAML nodes (an anchor and its alias, a
merge key): the key minted for one tenant must not be written into another's list
(the hub refuses a digest of two tenants: the file would no longer load)."""
from __future__ import annotations

import pytest
import yaml

from murmur_wsgi.cli import main
from murmur_wsgi.hub.config import load_config_file

from tests.hub.conftest import sha
from tests.hub.test_key_layouts import minted

SHARED = {
    "tenant-alias": "tenants:\n  a: &t\n    api_keys: []\n    agents: {x: {agent: demo}}\n"
                    "  b: *t\n",
    "merge-key": "tenants:\n  a: &t\n    api_keys: []   # a's keys\n"
                 "    agents: {x: {agent: demo}}\n  b:\n    <<: *t\n",
}


@pytest.mark.parametrize("layout", SHARED)
def test_a_key_minted_for_one_tenant_is_not_written_into_anothers(tmp_path, capsys, layout):
    path, key = minted(tmp_path, capsys, SHARED[layout], "a")
    tenants = yaml.safe_load(path.read_text())["tenants"]
    assert tenants["a"]["api_keys"] == [sha(key)]
    assert tenants["b"].get("api_keys") == []
    load_config_file(str(path), environ={})      # the hub still loads it


def test_a_key_of_tenants_read_through_a_merge_key_is_revoked_in_one_line(tmp_path, capsys):
    """tenants written inside a root merge key (``<<: {tenants: …}``): revoke met no
    ``tenants`` node and ended in an AttributeError traceback."""
    old, other = "d" * 64, "e" * 64
    path = tmp_path / "hub.yaml"
    path.write_text(f"<<: {{tenants: {{a: {{api_keys: [{old}, {other}], "
                    "agents: {x: {agent: demo}}}}}\n")
    assert main(["hub", "key", "a", "--config", str(path), "--revoke", old[:8]]) == 0
    assert yaml.safe_load(path.read_text())["tenants"]["a"]["api_keys"] == [other]
