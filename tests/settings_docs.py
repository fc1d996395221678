"""A settings table in the docs against the schema that reads those settings: every key a
schema takes has its row, and every row names a key it takes."""
from __future__ import annotations

import re
from pathlib import Path

import yaml
from marshmallow import fields, missing

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


UNREAD = object()           # a default the table words (a rule, another key's), not a value
_SIZE = re.compile(r"([0-9]+)(Ki|Mi|Gi)")
_UNITS = {"Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3}


def table_defaults(doc: str, heading: str) -> dict[str, object]:
    """The value each row of a table's Default column gives its key (its first one), as a
    schema would hold it; ``UNREAD`` where the cell words a rule rather than a value."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    found = {}
    for line in text[start:end if end >= 0 else None].splitlines():
        if line.startswith("| `"):
            cells = line.split("|")
            found[re.findall(r"`([^`]+)`", cells[1])[0]] = _documented(cells[2].strip())
    return found


def _documented(cell: str):
    cell = re.sub(r"\s+\([^)]*\)$", "", cell)              # "604800 (7 days)", "— (required)"
    head, _, rest = cell.partition(", ")
    if rest and not rest.startswith("at least"):          # "memory, or redis when …"
        return UNREAD
    head = head.strip("`")
    if head == "—":
        return None
    if head == '""':
        return ""
    if sized := _SIZE.fullmatch(head):
        return int(sized.group(1)) * _UNITS[sized.group(2)]
    value = yaml.safe_load(head) if re.fullmatch(r"[\w.:\[\]{}-]+", head) else UNREAD
    return value if isinstance(value, (bool, int, float, str, list, dict)) else UNREAD


def schema_defaults(schema, prefix: str = "") -> dict[str, object]:
    """The default each of a schema's leaves loads to, by dotted key (a key its block
    requires has none)."""
    found = {}
    for name, field in schema().fields.items():
        key = prefix + (field.data_key or name)
        if isinstance(field, fields.Nested):
            found.update(schema_defaults(type(field.schema), key + "."))
        elif not field.required:
            default = field.load_default
            found[key] = None if default is missing else default() if callable(default) else default
    return found


def misdocumented_defaults(doc: str, heading: str, schema) -> list[str]:
    """Each row whose Default column gives a value other than the one its key loads to."""
    loaded = schema_defaults(schema)
    wrong = []
    for key, shown in table_defaults(doc, heading).items():
        if shown is UNREAD or key not in loaded:
            continue
        actual = loaded[key]
        if actual != shown or isinstance(actual, bool) != isinstance(shown, bool):
            wrong.append(f"{key}: the table says {shown!r}, the schema loads {actual!r}")
    return wrong
