"""``hub key`` on the layouts a block list of api_keys is written in: comments kept."""
from __future__ import annotations

import pytest
import yaml

from murmur_wsgi.cli import main

from tests.hub.conftest import sha

OLD = "a" * 64
OTHER = "b" * 64

# NOTE: an "indentless" list (its dashes at the key's own column: yaml.safe_dump's and
# many editors' way) was rewritten whole by both, every comment of the file lost.
LAYOUTS = {
    "indentless": "tenants:\n  t:\n    # the keys\n    api_keys:\n    - {old}  # old\n"
                  "    - {other}\n    agents:\n      a: {{agent: demo}}   # keep me\n",
    "indented": "tenants:\n  t:\n    # the keys\n    api_keys:\n      - {old}  # old\n"
                "      - {other}\n    agents:\n      a: {{agent: demo}}   # keep me\n",
    "wide-dash": "tenants:\n  t:\n    # the keys\n    api_keys:\n      -   {old}  # old\n"
                 "      -   {other}\n    agents:\n      a: {{agent: demo}}   # keep me\n",
}
COMMENTS = ("# the keys", "# keep me")


def minted(tmp_path, capsys, text: str, tenant: str = "t"):
    """``hub key TENANT`` on a hub.yaml of ``text``: (the file's path, the key printed)."""
    path = tmp_path / "hub.yaml"
    path.write_text(text)
    assert main(["hub", "key", tenant, "--config", str(path)]) == 0
    return path, capsys.readouterr().out.strip()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_minted_key_goes_into_the_list_as_written(tmp_path, capsys, layout):
    path, key = minted(tmp_path, capsys, LAYOUTS[layout].format(old=OLD, other=OTHER))
    written = path.read_text()
    assert yaml.safe_load(written)["tenants"]["t"]["api_keys"] == [OLD, OTHER, sha(key)]
    assert all(comment in written for comment in COMMENTS + ("# old",)), written


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_revoked_key_leaves_the_list_as_written(tmp_path, capsys, layout):
    path = tmp_path / "hub.yaml"
    path.write_text(LAYOUTS[layout].format(old=OLD, other=OTHER))
    assert main(["hub", "key", "t", "--config", str(path), "--revoke", OTHER[:8]]) == 0
    written = path.read_text()
    assert yaml.safe_load(written)["tenants"]["t"]["api_keys"] == [OLD]
    assert all(comment in written for comment in COMMENTS + ("# old",)), written


# NOTE: a key written twice in one mapping (a block pasted in again): YAML's reader keeps
# the last, and so does the hub. hub key edited the first: the minted key went into a
# list the hub never reads (exit 0, a key that never worked), and --revoke of a key of
# the last list met no such entry in the first (StopIteration's traceback).
TWICE = ("tenants:\n  t:\n    api_keys:\n      - {other}\n      - {old}\n"
         "    agents:\n      a: {{agent: demo}}\n"
         "  t:\n    # the keys\n    api_keys:\n      - {old}  # old\n      - {other}\n"
         "    agents:\n      a: {{agent: demo}}   # keep me\n")


def test_a_key_written_twice_is_edited_where_the_hub_reads_it(tmp_path, capsys):
    path = tmp_path / "hub.yaml"
    path.write_text(TWICE.format(old=OLD, other=OTHER))
    assert main(["hub", "key", "t", "--config", str(path)]) == 0
    key = capsys.readouterr().out.strip()
    assert yaml.safe_load(path.read_text())["tenants"]["t"]["api_keys"] == [OLD, OTHER,
                                                                            sha(key)]
    assert main(["hub", "key", "t", "--config", str(path), "--revoke", OLD[:8]]) == 0
    written = path.read_text()
    assert yaml.safe_load(written)["tenants"]["t"]["api_keys"] == [OTHER, sha(key)]
    assert all(comment in written for comment in COMMENTS), written


# NOTE: an anchor or a tag on the key's line put the new line at the anchor's column,
# inside the last entry (a key of two digests); after a block scalar entry ("- |-") it
# went past the list. Each edit is now read back before it is written.
MARKED = {
    "anchor": "tenants:\n  t:\n    # the keys\n    api_keys: &k\n      - {old}  # old\n"
              "      - {other}\n    agents:\n      a: {{agent: demo}}   # keep me\n",
    "tag": "tenants:\n  t:\n    # the keys\n    api_keys: !!seq\n      - {old}  # old\n"
           "      - {other}\n    agents:\n      a: {{agent: demo}}   # keep me\n",
    "block-scalar": "tenants:\n  t:\n    # the keys\n    api_keys:\n      - {old}  # old\n"
                    "      - |-\n        {other}\n    agents:\n      a: {{agent: demo}}   # keep me\n",
}


@pytest.mark.parametrize("layout", MARKED)
def test_a_minted_key_reads_back_whatever_marks_the_list(tmp_path, capsys, layout):
    path, key = minted(tmp_path, capsys, MARKED[layout].format(old=OLD, other=OTHER))
    assert yaml.safe_load(path.read_text())["tenants"]["t"]["api_keys"] == [OLD, OTHER, sha(key)]
    assert main(["hub", "key", "t", "--config", str(path), "--revoke", OTHER[:8]]) == 0
    assert yaml.safe_load(path.read_text())["tenants"]["t"]["api_keys"] == [OLD, sha(key)]
