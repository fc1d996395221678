"""The package's import graph: no cycle between modules nor between packages, and a client
apart from the server.

Every ``import`` counts, wherever it is written (module level, inside a
function, under ``TYPE_CHECKING``): a cycle hidden in a function or a type
hint is still two modules that cannot be read, or moved, one without the other.
"""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

import murmur_wsgi

PACKAGE = pathlib.Path(murmur_wsgi.__file__).parent
NAME = "murmur_wsgi"

# What the client package may reach: itself, and the shared rooms both sides use.
CLIENT_MAY_IMPORT = ("murmur_wsgi.client", "murmur_wsgi.codes", "murmur_wsgi.wire.task",
                     "murmur_wsgi.wire.json_counts", "murmur_wsgi.rfc3339", "murmur_wsgi.running",
                     "murmur_wsgi.timers", "murmur_wsgi.cuts", "murmur_wsgi.uris",
                     "murmur_wsgi.turns", "murmur_wsgi.keyed_turns",
                     # the timers' callbacks carry the log bound of whoever armed them
                     "murmur_wsgi.logs")
# ``murmur_wsgi`` itself (``__version__``) is shared too, but its create_app() imports
# the app inside a function: the package is a leaf for the client's closure.
PACKAGE_LEAF = NAME


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(_resolve(alias.name) for alias in node.names
                         if alias.name.split(".")[0] == NAME)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[:len(here) - node.level + 1]
                base = ".".join(here + ([base] if base else []))
            if base.split(".")[0] != NAME:
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in MODULES else _resolve(base))
    found.discard(None)
    found.discard(module)
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


PACKAGES = sorted(m for m, path in MODULES.items() if path.name == "__init__.py")


def _package_graph(package: str) -> tuple[dict[str, set[str]], dict[tuple[str, str], list[str]]]:
    """The graph of ``package``'s children (its subpackages and modules), and why each edge is.

    A child depends on another when any module inside it imports any module inside
    the other; the package's own ``__init__`` is no child.
    """
    def child(module: str) -> str | None:
        if not module.startswith(package + "."):
            return None
        return f"{package}.{module[len(package) + 1:].split('.')[0]}"

    graph: dict[str, set[str]] = {}
    why: dict[tuple[str, str], list[str]] = {}
    for module, imported in GRAPH.items():
        here = child(module)
        if here is None:
            continue
        graph.setdefault(here, set())
        for other in imported:
            there = child(other)
            if there is not None and there != here:
                graph[here].add(there)
                why.setdefault((here, there), []).append(f"{module} imports {other}")
    return graph, why


def _explain(cycle: list[str], graph, why) -> str:
    return "\n".join(f"  {a} -> {b}: " + "; ".join(sorted(why[(a, b)]))
                     for a in cycle for b in sorted(graph[a] & set(cycle)))


def test_the_graph_sees_the_package():
    assert len(GRAPH) > 40
    assert "murmur_wsgi.door.tasks.store" in GRAPH["murmur_wsgi.door.tasks.manager"] or \
        "murmur_wsgi.door.tasks.record" in GRAPH["murmur_wsgi.door.tasks.manager"]


@pytest.mark.parametrize("graph, expected", [
    pytest.param({"a": {"b"}, "b": {"a"}, "c": {"a"}}, [["a", "b"]], id="two"),
    pytest.param({"a": {"b"}, "b": {"c"}, "c": set()}, [], id="chain"),
    pytest.param({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]], id="three"),
])
def test_cycles_finds_cycles(graph, expected):
    assert _cycles(graph) == expected


def test_no_import_cycle_between_modules():
    assert _cycles(GRAPH) == []


def test_package_graph_sees_the_packages():
    graph, why = _package_graph(NAME)
    assert {"murmur_wsgi.wire", "murmur_wsgi.door", "murmur_wsgi.errors"} <= set(graph)
    assert "murmur_wsgi.door.tasks" in _package_graph("murmur_wsgi.door")[0]
    assert "murmur_wsgi.errors" in graph["murmur_wsgi.wire"]
    assert "murmur_wsgi.wire.base imports murmur_wsgi.errors" in why[
        ("murmur_wsgi.wire", "murmur_wsgi.errors")]
    assert "murmur_wsgi.hub.store" in _package_graph("murmur_wsgi.hub")[0]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_between_packages(package):
    """Within each package, its subpackages and modules import one another without a cycle."""
    graph, why = _package_graph(package)
    cycles = _cycles(graph)
    assert cycles == [], "import cycles between packages:\n" + "\n".join(
        " <-> ".join(cycle) + "\n" + _explain(cycle, graph, why) for cycle in cycles)


def test_client_imports_nothing_from_the_server_side():
    reached, todo = set(), ["murmur_wsgi.client"] + [m for m in MODULES
                                                    if m.startswith("murmur_wsgi.client.")]
    while todo:
        module = todo.pop()
        if module in reached:
            continue
        reached.add(module)
        if module != PACKAGE_LEAF:
            todo.extend(GRAPH[module])
    outside = sorted(m for m in reached - {PACKAGE_LEAF}
                     if not any(m == ok or m.startswith(ok + ".") for ok in CLIENT_MAY_IMPORT))
    assert outside == []


# The two applications, and the shared rooms that must stand without either.
DOOR = "murmur_wsgi.door"
HUB = "murmur_wsgi.hub"
SHARED_ROOMS = ("murmur_wsgi.agents", "murmur_wsgi.wire", "murmur_wsgi.streams",
                "murmur_wsgi.serving", "murmur_wsgi.client")
# The package's entry points and thin aliases may name both applications.
ENTRY_MODULES = ("murmur_wsgi", "murmur_wsgi.cli", "murmur_wsgi.wsgi", "murmur_wsgi.worker",
                 "murmur_wsgi.gunicorn_conf")


def _inside(module: str, room: str) -> bool:
    return module == room or module.startswith(room + ".")


def _crossings(importers, forbidden) -> list[str]:
    """Each import, by a module inside one of ``importers``, of a module inside ``forbidden``."""
    return sorted(f"{module} imports {other}"
                  for module, imported in GRAPH.items()
                  if module not in ENTRY_MODULES and any(_inside(module, r) for r in importers)
                  for other in imported if any(_inside(other, r) for r in forbidden))


def test_crossings_names_each_offending_import():
    assert "murmur_wsgi.door.app" in GRAPH and "murmur_wsgi.hub.app" in GRAPH
    found = _crossings(("murmur_wsgi.door",), ("murmur_wsgi.errors",))
    assert "murmur_wsgi.door.dispatch imports murmur_wsgi.errors" in found


def test_the_hub_imports_nothing_from_the_door():
    found = _crossings((HUB,), (DOOR,))
    assert found == [], "the hub imports the door:\n  " + "\n  ".join(found)


def test_the_door_imports_nothing_from_the_hub():
    found = _crossings((DOOR,), (HUB,))
    assert found == [], "the door imports the hub:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("room", SHARED_ROOMS)
def test_shared_rooms_import_neither_application(room):
    found = _crossings((room,), (DOOR, HUB))
    assert found == [], f"{room} imports an application:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("module", [m for m in MODULES
                                    if m.count(".") == 1 and m not in ENTRY_MODULES
                                    and not (PACKAGE / m.split(".")[1]).is_dir()])
def test_small_shared_modules_import_neither_application(module):
    found = _crossings((module,), (DOOR, HUB))
    assert found == [], f"{module} imports an application:\n  " + "\n  ".join(found)


def test_the_command_line_loads_an_application_only_to_serve_it():
    """``murmur-wsgi``'s client commands (card, send, get, ps…) load neither application nor
    what only serving needs: a command started in 0.36 s, 0.17 s without them. Measured in
    a process of its own: this one has imported everything."""
    probe = ("import sys, murmur_wsgi.cli\n"
             "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('marshmallow', 'werkzeug', 'gevent', 'yaml') or m.startswith(("
             f"{DOOR + '.'!r}, {HUB + '.'!r}, 'murmur_wsgi.agents')))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == [], done.stdout
