"""docs/hub.md's *Inside* names every module of the hub (push/ lists its own)."""
from __future__ import annotations

import re
from pathlib import Path

import murmur_wsgi.hub

HUB = Path(murmur_wsgi.hub.__file__).parent
DOCS = Path(__file__).resolve().parents[2] / "docs" / "hub.md"


def test_every_module_of_the_hub_is_named_in_the_docs_inside():
    text = DOCS.read_text(encoding="utf-8")
    inside = text[text.index("## Inside"):]
    inside = inside[:inside.index("```", inside.index("```") + 3)]
    named = set(re.findall(r"[a-z_]+\.py", inside))
    modules = {path.name for folder in (HUB, HUB / "store", HUB / "methods")
               for path in folder.glob("*.py") if path.name != "__init__.py"}
    assert modules - named == set()
