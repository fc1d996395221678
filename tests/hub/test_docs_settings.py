"""Every setting hub.yaml takes is in docs/hub.md's table of settings, and every key the
table names is one hub.yaml takes: an operator reads what the hub does with each."""
from __future__ import annotations

import re
from pathlib import Path

from marshmallow import fields

from murmur_wsgi.hub.config_schema import HubSchema

DOC = Path(__file__).resolve().parents[2] / "docs" / "hub.md"
# Blocks documented by their members' own keys, or as a whole.
WHOLE = {"pricing", "tenants"}


def settings(schema, prefix: str = "") -> set[str]:
    """The dotted keys of ``schema``'s leaves (a nested block's members, not the block)."""
    found = set()
    for name, field in schema().fields.items():
        key = prefix + (field.data_key or name)
        if key in WHOLE:
            continue
        if isinstance(field, fields.Nested):
            found |= settings(type(field.schema), key + ".")
        else:
            found.add(key)
    return found


def table() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Configuration (hub.yaml)")
    return text[start:text.index("\n## ", start + 1)]


def documented_keys() -> set[str]:
    """The keys the table's first column names (``a.b`` / ``c`` names ``a.b`` and ``a.c``)."""
    keys = set()
    for line in table().splitlines():
        if not line.startswith("| `"):
            continue
        names = re.findall(r"`([^`]+)`", line.split("|")[1])
        first = names[0]
        keys.add(first)
        parent = first.rsplit(".", 1)[0] + "." if "." in first else ""
        keys.update(parent + name for name in names[1:])
    return keys


def test_every_setting_is_in_the_table():
    missing = sorted(settings(HubSchema) - documented_keys())
    assert missing == []


def test_the_table_names_only_settings():
    named = {key for key in documented_keys() if key.split(".")[0] not in WHOLE}
    assert sorted(named - settings(HubSchema)) == []
