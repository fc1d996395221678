"""The layers keep to their rooms (docs/architecture.md): checked on the source itself.

- A handler in methods/ never takes the store's lock: the store and the task
  manager expose the operations that need it.
- A handler reads typed params: only the readers registered in the method table
  read ``call.params``.
- session/delegations.py holds who waits on what: no HTTP header, no JSON-RPC result.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

import murmur_wsgi
from murmur_wsgi.door import methods

PACKAGE = pathlib.Path(murmur_wsgi.__file__).parent
METHOD_MODULES = sorted((PACKAGE / "door" / "methods").glob("*.py"))
READERS = {method.read.__name__ for method in [*methods.METHODS.values(), methods.COMPLETION]}


def tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", METHOD_MODULES, ids=lambda p: p.name)
def test_no_handler_takes_the_store_lock(path):
    touched = [node.lineno for node in ast.walk(tree(path))
               if isinstance(node, ast.Attribute) and node.attr in ("lock", "_lock")]
    assert touched == []


@pytest.mark.parametrize("path", METHOD_MODULES, ids=lambda p: p.name)
def test_only_the_readers_read_raw_params(path):
    readers_seen = set()
    outside = []
    for func in ast.walk(tree(path)):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        reads = [node.lineno for node in ast.walk(func)
                 if isinstance(node, ast.Attribute) and node.attr == "params"
                 and isinstance(node.value, ast.Name) and node.value.id == "call"]
        if func.name in READERS:
            readers_seen.add(func.name)
        elif reads:
            outside.append((func.name, reads))
    assert outside == []


def test_the_readers_are_found():
    assert {"task_id", "list_params", "message_params"} <= READERS


def test_delegations_read_no_header_and_write_no_result():
    source = (PACKAGE / "door" / "session" / "delegations.py").read_text(encoding="utf-8")
    assert "environ" not in source and "HTTP_" not in source
    strings = [node.value for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    assert not {"message", "result", "jsonrpc", "parts"} & set(strings)
