"""Every ``threading.Condition`` of the library is built on an ``RLock``.

A ``Condition`` over a plain ``Lock`` checks that its caller holds the lock by trying
to take it; under gevent a failed non-blocking acquire yields to the event loop, so
each ``wait`` and ``notify`` would switch greenlets with the lock held
(docs/architecture.md, Concurrency). The source is read: each ``Condition(…)`` call's
lock is ``RLock()`` itself, or a name no assignment in its module binds to ``Lock()``.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "murmur_wsgi"


def _called(node, name: str) -> bool:
    """``node`` is a call of ``name`` or ``threading.<name>``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == name) or \
        (isinstance(func, ast.Attribute) and func.attr == name)


def _name(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def conditions_on_plain_locks(source: str) -> list[int]:
    """The lines of ``source`` whose ``Condition`` is built on a plain ``Lock``."""
    tree = ast.parse(source)
    plain = set()               # names an assignment binds to Lock()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and _called(node.value, "Lock"):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            plain.update(filter(None, map(_name, targets)))
    found = []
    for node in ast.walk(tree):
        if not _called(node, "Condition"):
            continue
        lock = node.args[0] if node.args else None
        if lock is None:
            continue                            # Condition(): an RLock of its own
        if _called(lock, "Lock") or _name(lock) in plain:
            found.append(node.lineno)
    return found


def test_no_condition_of_the_library_is_built_on_a_plain_lock():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in modules
             for line in conditions_on_plain_locks(path.read_text(encoding="utf-8"))]
    assert found == [], "a Condition on a plain Lock:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("source, lines", [
    ("import threading\nc = threading.Condition(threading.Lock())\n", [2]),
    ("import threading\nclass A:\n    def __init__(self):\n        self._lock = threading.Lock()\n"
     "        self.c = threading.Condition(self._lock)\n", [5]),
    ("import threading\nlock = threading.RLock()\nc = threading.Condition(lock)\n", []),
    ("import threading\nc = threading.Condition()\n", []),
])
def test_the_check_finds_a_plain_lock_under_a_condition(source, lines):
    assert conditions_on_plain_locks(source) == lines
