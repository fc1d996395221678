"""A settings table in the docs against the schema that reads those settings: every key a
schema takes has its row, and every row names a key it takes."""
from __future__ import annotations

import re
from pathlib import Path

from marshmallow import fields

DOCS = Path(__file__).resolve().parents[1] / "docs"


def schema_keys(schema, whole: frozenset = frozenset(), prefix: str = "") -> set[str]:
    """The dotted keys of ``schema``'s leaves (a nested block's members, not the block);
    the blocks in ``whole`` are documented as one row each, not by their members."""
    found = set()
    for name, field in schema().fields.items():
        key = prefix + (field.data_key or name)
        if key in whole:
            continue
        if isinstance(field, fields.Nested):
            found |= schema_keys(type(field.schema), whole, key + ".")
        else:
            found.add(key)
    return found


def table_keys(doc: str, heading: str) -> set[str]:
    """The keys a table's first column names, in the section ``heading`` of ``doc``
    (``a.b`` / ``c`` names ``a.b`` and ``a.c``)."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    keys = set()
    for line in text[start:end if end >= 0 else None].splitlines():
        if not line.startswith("| `"):
            continue
        names = re.findall(r"`([^`]+)`", line.split("|")[1])
        keys.add(names[0])
        parent = names[0].rsplit(".", 1)[0] + "." if "." in names[0] else ""
        keys.update(parent + name for name in names[1:])
    return keys
