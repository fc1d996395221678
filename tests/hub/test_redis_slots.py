"""Every key of the Redis store in one slot per script, and tenants spread over a cluster.

(On one Redis, not a cluster, ``OPEN`` is also given the replica's runs, the hub's slot:
the cluster's runs below give it the tenant's keys only, as the store does there.)

- Statically: every Lua script of the store names a key only through ``KEYS`` (a key
  argument of ``redis.call`` is ``KEYS[…]``, or a local bound only to ``KEYS[…]``, or a
  function parameter every call passes one of those): no script builds a key name.
- On the real 3-primary cluster, every script run with Redis's own strict check (a
  ``#!lua`` script may touch the keys of one slot only: any other slot's key is refused)
  through a workload of tenants whose slots are on different primaries: each script ran,
  and none touched a key outside its slot.
- On the cluster, 30 tenants' tasks: each tenant's keys on one primary, and the tenants
  over all three.
"""
from __future__ import annotations

import hashlib
import re
import threading
import time
import uuid

import pytest

from murmur_wsgi.hub.store import (redis_limits, redis_push_scripts, redis_read_scripts,
                                   redis_replicas, redis_scripts, redis_stores)
from murmur_wsgi.hub.store.push_base import DELIVERED, PushRecord
from murmur_wsgi.hub.store.redis_events import REWATCH_SECS
from murmur_wsgi.hub.store.redis_keys import HUB, live_key, runs_key, tenant_prefix
from murmur_wsgi.hub.store.retention import Retention
from murmur_wsgi.hub.task import COMPLETED, FAILED, REJECTED, HubTask
from murmur_wsgi.wire.task import text_part

from tests.hub.conftest import wait_until

MODULES = (redis_scripts, redis_read_scripts, redis_limits, redis_push_scripts,
           redis_replicas)
READ_ONLY = {"PAGE"}             # sent by EVALSHA_RO, which refuses a ``#!lua`` one
NO_KEYS = {"TIME", "PUBLISH"}            # commands that name no key
EVERY_ARG = {"DEL", "EXISTS", "MGET"}     # commands whose every argument is a key
CALL = re.compile(r"redis\.call\(\s*'([A-Z]+)'")
IDENT = re.compile(r"[A-Za-z_]\w*")
FROM_KEYS = re.compile(r"KEYS\[[^\[\]]+\]")


def _scripts() -> dict:
    """Every script of the store: ``module.NAME`` -> its source."""
    return {f"{module.__name__.rsplit('.', 1)[1]}.{name}": value
            for module in MODULES for name, value in vars(module).items()
            if _is_script(name, value)}


def _is_script(name: str, value) -> bool:
    """A whole script (not a fragment: ``_MOVE``, ``ADMIT_FN``)."""
    return (name.isupper() and not name.startswith("_") and not name.endswith("_FN")
            and isinstance(value, str) and "redis.call(" in value)


def _split(text: str, start: int) -> tuple[list[str], int]:
    """The comma-separated expressions from ``start`` to the bracket that closes them."""
    parts, depth, i, piece = [], 0, start, ""
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            end = text.index(ch, i + 1)
            piece, i = piece + text[i:end + 1], end + 1
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return parts + [piece.strip()], i
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(piece.strip())
            piece, i = "", i + 1
            continue
        piece += ch
        i += 1
    raise ValueError("unclosed call")


def _key_args(source: str) -> list[tuple[str, str]]:
    """``(command, expression)`` of every key argument of every ``redis.call``."""
    found = []
    for call in CALL.finditer(source):
        command = call.group(1)
        args, _ = _split(source, call.end())
        args = [a for a in args[1:] if a]
        if command in NO_KEYS:
            continue
        found += [(command, arg) for arg in (args if command in EVERY_ARG else args[:1])]
    return found


def _definitions(source: str, name: str) -> list[str]:
    """What ``name`` is bound to: each right-hand expression assigned to it, and for a
    function parameter each argument the function's calls pass in its place; a loop
    variable is ``<loop>`` (never a key's)."""
    bound = []
    assign = re.compile(r"(?:local\s+)?((?:[A-Za-z_]\w*\s*,\s*)*[A-Za-z_]\w*)\s*=(?!=)")
    for match in assign.finditer(source):
        names = [n.strip() for n in match.group(1).split(",")]
        if name not in names or source[max(0, match.start() - 1):match.start()] == ".":
            continue                          # another name's, or a table's field
        line_end = source.find("\n", match.end())
        line_end = len(source) if line_end < 0 else line_end
        values, _ = _split(source[:line_end] + ")", match.end())
        index = names.index(name)
        bound.append(values[index] if index < len(values) else "<nil>")
    for function in re.finditer(r"function\s+(\w+)\(([^)]*)\)", source):
        params = [p.strip() for p in function.group(2).split(",")]
        if name not in params:
            continue
        index = params.index(name)
        for call in re.finditer(r"(?<!function )\b" + function.group(1) + r"\(", source):
            args, _ = _split(source, call.end())
            bound.append(args[index] if index < len(args) else "<nil>")
    if re.search(r"\bfor\s+(?:[\w\s,]*\b)?" + name + r"\b[\w\s,]*\bin\b", source):
        bound.append("<loop>")
    return bound


def _from_keys(source: str, expression: str, seen: frozenset = frozenset()) -> bool:
    """Whether ``expression`` is only ever one of ``KEYS``."""
    if FROM_KEYS.fullmatch(expression):
        return True
    if not IDENT.fullmatch(expression):
        return False
    if expression in seen:
        return True                         # a cycle: the other bindings decide
    bound = _definitions(source, expression)
    return bool(bound) and all(_from_keys(source, b, seen | {expression}) for b in bound)


def test_every_script_names_its_keys_only_through_keys():
    found = _scripts()
    assert {"redis_scripts.OPEN", "redis_scripts.END", "redis_scripts.FORGET",
            "redis_push_scripts.DUE", "redis_limits.RENEW",
            "redis_replicas.FORGET_REPLICA"} <= set(found)
    wrong = {}
    for name, source in found.items():
        args = _key_args(source)
        assert args, name
        bad = [f"{command} {arg}" for command, arg in args if not _from_keys(source, arg)]
        if bad:
            wrong[name] = bad
    assert wrong == {}
    # No key prefix is joined inside a script (a ``prefix .. 'st:'`` form).
    assert not [n for n, s in found.items() if re.search(r"\.\.\s*'[a-z]+:", s)]


def test_the_checker_finds_a_key_built_in_lua():
    """The static check itself: a key from ARGV, or joined, or through a local, is found."""
    for source in ("redis.call('GET', ARGV[1] .. 'task:' .. id)",
                   "local k = ARGV[1]\nredis.call('HGET', k, 'x')",
                   "local function f(k) return redis.call('GET', k) end\nf(ARGV[2])",
                   "for _, m in ipairs(KEYS) do redis.call('DEL', m) end"):
        args = _key_args(source)
        assert args and not all(_from_keys(source, arg) for _, arg in args), source
    good = "local a, b = KEYS[1], KEYS[2]\nredis.call('DEL', a, b, KEYS[3])"
    assert all(_from_keys(good, arg) for _, arg in _key_args(good))


# --- on the cluster -----------------------------------------------------------------------


def _on_each_node(cluster, call) -> dict:
    """``{port: call(client)}`` for every node of ``cluster``, each on a client of its own."""
    found = {}
    for node in cluster.nodes:
        one = node.client()
        try:
            found[node.port] = call(one)
        finally:
            one.close()
    return found


def _node_of(client, key: str) -> str:
    return client.get_node_from_key(key).name


def _tenants_on_every_primary(client, count: int = 3) -> list[str]:
    """Tenant names whose slots are on ``count`` different primaries (the first found)."""
    picked: dict[str, str] = {}
    for i in range(1000):
        tenant = f"tenant-{i}"
        picked.setdefault(_node_of(client, tenant_prefix(tenant)), tenant)
        if len(picked) == count:
            return sorted(picked.values())
    raise AssertionError("no tenants on every primary")


def _task(tenant: str, agent: str = "echo") -> HubTask:
    message_id = uuid.uuid4().hex
    return HubTask(str(uuid.uuid4()), "ctx", tenant, agent, message_id,
                   {"messageId": message_id, "role": "ROLE_USER", "parts": [text_part("hi")]})


@pytest.fixture
def strict(monkeypatch):
    """Every script of the store as ``#!lua`` (Redis refuses any key outside the slot of
    its KEYS), and the SHA-1 of each, to find which ran."""
    shas = {}
    for module in MODULES:
        for name, source in list(vars(module).items()):
            if _is_script(name, source):
                known = f"{module.__name__.rsplit('.', 1)[1]}.{name}"
                flags = " flags=no-writes" if name in READ_ONLY else ""
                strict_source = f"#!lua{flags}\n" + source
                monkeypatch.setattr(module, name, strict_source)
                shas[known] = hashlib.sha1(strict_source.encode()).hexdigest()
    return shas


def test_every_script_touches_one_slot_on_the_cluster(redis_cluster, strict):
    redis_cluster.flush()
    _on_each_node(redis_cluster, lambda one: one.script_flush())
    client = redis_cluster.client()
    tenants = _tenants_on_every_primary(client)
    stores = redis_stores(redis_cluster.url, timeout_secs=2.0, replica_id="me",
                          retention=Retention(60.0, 1))
    try:
        tasks, counters, push = stores.tasks, stores.counters, stores.push
        client.set(live_key("me"), "1", px=60_000)
        running = []
        for tenant in tenants:
            opened = tasks.open(_task(tenant), '{"task":{}}', counters, 5, 100)
            assert opened.started is not None
            made = _task(tenant)
            tasks.create(made, made.task_event())
            assert tasks.start(made.id) is not None
            assert tasks.append(made.id, '{"artifactUpdate":{}}')
            tasks.mark_cancel(made.id)
            tasks.release_message(tenant, "echo", "no-such-message")
            refused = _task(tenant)
            refused.set_state(REJECTED, "refused")
            tasks.create(refused, refused.task_event(), bind=False)   # retention: forgets one
            saved = push.push_save(PushRecord(tenant, "echo", made.id, "c1", "https://h/x",
                                              None), from_start=True)
            assert push.push_lease(saved, "me")
            assert push.push_advance(saved, "me", 1, DELIVERED) is not None
            push.push_release(saved, "me")
            assert push.push_delete(tenant, "echo", made.id, "c1")
            push.push_save(PushRecord(tenant, "echo", made.id, "c2", "https://h/x", None),
                           from_start=True)
            assert counters.take(tenant, "t-" + tenant, 5, 100) is None
            counters.hold(tenant, "overdue:t-" + tenant)
            assert counters.running(tenant) >= 2
            running.append((tenant, made.id))
        assert push.push_due("me", 0)
        # A stream's read (READ), and the replica's renewal of what its streams read (WATCH).
        tenant, task_id = running[0]
        got = []
        reader = threading.Thread(target=lambda: got.append(tasks.events(task_id, 3, 10.0)),
                                  daemon=True)
        reader.start()
        wait_until(lambda: tasks.conn.feed.reading() == [task_id])
        tasks._marked[task_id] = (tenant, time.monotonic() - REWATCH_SECS)
        tasks.keep_watching()
        counters.renew([(tenant, "t-" + tenant) for tenant in tenants])
        for tenant, task_id in running:
            assert tasks.end(task_id, COMPLETED, None, None, []) is not None
        reader.join(10)
        assert got and [e.seq for e in got[0][0]] == [4]     # the end: announced, read
        tasks.expire_finished()
        # A dead replica's runs: the sweep ends them, then forgets the replica.
        dead = _task(tenants[0])
        other = redis_stores(redis_cluster.url, timeout_secs=2.0, replica_id="gone")
        try:
            other.tasks.create(dead, dead.task_event())     # listed in runs:gone, then dies
        finally:
            other.close()
        assert client.zcard(runs_key("gone")) == 1
        assert stores.replicas.sweep(3600.0, "swept") == [dead.id]
        assert tasks.get(dead.tenant, "echo", dead.id).state == FAILED
        assert not client.sismember(HUB + "replicas", "gone")
        loaded = _on_each_node(redis_cluster, lambda one: one.script_exists(*strict.values()))
        ran = {name for hits in loaded.values() for name, hit in zip(strict, hits) if hit}
        assert ran == set(strict)
    finally:
        stores.close()
        client.close()


def test_thirty_tenants_spread_over_the_three_primaries(redis_cluster):
    redis_cluster.flush()
    stores = redis_stores(redis_cluster.url, timeout_secs=2.0, replica_id="me")
    tenants = [f"tenant-{n:02d}" for n in range(30)]
    try:
        for tenant in tenants:
            for _ in range(2):
                task = _task(tenant)
                stores.tasks.create(task, task.task_event())
                stores.tasks.end(task.id, COMPLETED, None, None, [])
    finally:
        stores.close()
    # A primary's port -> the tenants whose keys it holds.
    held = {port: found for port, found in _on_each_node(redis_cluster, lambda one: {
        key[len("murmur:{t:"):key.index("}")]
        for key in one.scan_iter(match="murmur:{t:*", count=1000)}).items() if found}
    assert sorted(t for found in held.values() for t in found) == tenants   # each on one
    assert len(held) == 3 and all(len(found) >= 3 for found in held.values()), \
        {port: len(found) for port, found in held.items()}
