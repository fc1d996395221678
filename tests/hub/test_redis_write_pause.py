"""A primary that pauses writes (``CLIENT PAUSE … WRITE``, as ``FAILOVER`` and ``CLUSTER
FAILOVER`` pause one) still answers a task's reads: the record, and a finished task's log,
are read by read-only scripts (``EVALSHA_RO``, ``EVAL_RO`` once Redis forgot one), which
such a pause lets through, where it holds ``EVALSHA``. A Redis that knows no
``EVALSHA_RO`` (before 7.0) is read by ``EVALSHA``, as before."""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.hub.store.redis_reads import SCRIPTED

from murmur_wsgi.hub import create_hub

from tests.hub.conftest import (FAST, HubClient, close_hub, hub_config, not_cancelable,
                                redis_hub, sse_events)
from tests.redis_util import RedisServer

pytestmark = pytest.mark.cluster


def _primaries(server) -> list:
    """A client of each primary of ``server`` (a redis-server, or a cluster's nodes)."""
    nodes = getattr(server, "nodes", None)
    return [node.client() for node in nodes] if nodes else [server.client()]


def _paused(primaries, ms: int = 30_000) -> None:
    for primary in primaries:
        primary.execute_command("CLIENT", "PAUSE", ms, "WRITE")


def _unpaused(primaries) -> None:
    for primary in primaries:
        primary.execute_command("CLIENT", "UNPAUSE")


def test_get_task_answers_while_the_primary_pauses_writes(redis_server):
    """Writes paused for 30 s on every primary: GetTask answers the task at once, and again
    once Redis has forgotten the script. Before, its read waited on the pause, and the
    hub answered -32603 at ``redis.timeout_secs`` (1 s here)."""
    hub = redis_hub(redis_server, redis={"timeout_secs": 1.0})
    client = HubClient(hub, "echo")
    primaries = _primaries(redis_server)
    try:
        task = client.send("hello")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        _paused(primaries)
        try:
            assert client.result("GetTask", {"id": task["id"]}) == task
        finally:
            _unpaused(primaries)
        for primary in primaries:
            primary.script_flush()
        _paused(primaries)
        try:
            assert client.result("GetTask", {"id": task["id"]}) == task      # EVAL_RO
        finally:
            _unpaused(primaries)
    finally:
        for primary in primaries:
            primary.close()
        close_hub(hub)


def test_a_finished_tasks_stream_answers_while_the_primary_pauses_writes(redis_server):
    """Writes paused for 30 s on every primary: SubscribeToTask of a finished task replays
    its log to its final event, as without the pause, and again once Redis has forgotten
    the scripts; CancelTask of it is refused as not cancelable. Each paused stream is a
    replica's that has not read the task before (one that has answers from what it read).
    Before, the stream's read (a script that marks the task watched, a write) waited on the
    pause, and the stream was -32603 at ``redis.timeout_secs`` (1 s here)."""
    hub = redis_hub(redis_server, redis={"timeout_secs": 1.0})
    client = HubClient(hub, "echo")
    primaries = _primaries(redis_server)
    try:
        task = client.send("hello")
        replayed = sse_events(client.call("SubscribeToTask", {"id": task["id"]}))
        assert replayed[0]["result"]["task"]["id"] == task["id"]
        assert replayed[-1]["result"]["statusUpdate"]["status"] == task["status"]
        refused = not_cancelable(task["id"], "TASK_STATE_COMPLETED")
        for flushed in (False, True):
            if flushed:
                for primary in primaries:
                    primary.script_flush()
            other = create_hub(hub_config(store=redis_server.url,
                                          redis=dict(FAST, timeout_secs=1.0)))
            _paused(primaries)
            try:
                stream = HubClient(other, "echo").call("SubscribeToTask", {"id": task["id"]})
                assert [event.get("result") for event in sse_events(stream)] == \
                    [event["result"] for event in replayed]
                assert HubClient(other, "echo").error("CancelTask",
                                                      {"id": task["id"]}) == refused
            finally:
                _unpaused(primaries)
                close_hub(other)
    finally:
        for primary in primaries:
            primary.close()
        close_hub(hub)


@pytest.mark.parametrize("without", ["renamed", "acl"])
def test_a_redis_without_read_only_scripts_is_read_by_evalsha(tmp_path, without):
    """A redis-server whose ``EVALSHA_RO`` and ``EVAL_RO`` are gone (``rename-command``, as
    on a Redis before 7.0, which has neither), or whose ACL allows the hub's user
    ``EVALSHA`` but not them: the hub reads by ``EVALSHA`` instead, from its first read on
    (its first answered too: the refusal is not the client's), a finished task's stream
    too."""
    renamed = ("--rename-command", "EVALSHA_RO", "", "--rename-command", "EVAL_RO", "")
    server = RedisServer(tmp_path, extra=renamed if without == "renamed" else ()).start()
    admin = server.client()
    if without == "acl":
        admin.execute_command("ACL", "SETUSER", "default", "-evalsha_ro", "-eval_ro")
    hub = redis_hub(server)
    client = HubClient(hub, "echo")
    other = create_hub(hub_config(store=server.url, redis=FAST))
    try:
        task = client.send("hello")
        assert client.result("GetTask", {"id": task["id"]}) == task
        assert hub.store._read_by == SCRIPTED
        assert client.result("GetTask", {"id": task["id"]}) == task
        replayed = sse_events(client.call("SubscribeToTask", {"id": task["id"]}))
        assert replayed[-1]["result"]["statusUpdate"]["status"] == task["status"]
        # A store whose first read-only script is a finished task's page: refused, then
        # read by ``EVALSHA`` too.
        events, available = other.store.events(task["id"], 0, 1.0, tenant="acme",
                                               finished=True)
        assert available and [json.loads(e.payload)["statusUpdate"]["status"]
                              for e in events[-1:]] == [task["status"]]
        assert other.store._read_by == SCRIPTED
    finally:
        admin.close()
        close_hub(other)
        close_hub(hub)
        server.stop()


def test_an_acl_without_eval_ro_still_reads_through_a_write_pause(tmp_path):
    """A user allowed ``EVALSHA_RO`` but not ``EVAL_RO``: a script Redis forgot is loaded
    by ``EVAL`` once, and read by ``EVALSHA_RO`` again, so a write pause still lets the
    reads through. Before, the store read by ``EVALSHA`` for good from the first refusal,
    and GetTask waited on the pause."""
    server = RedisServer(tmp_path).start()
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "default", "-eval_ro")
    hub = redis_hub(server, redis={"timeout_secs": 1.0})
    client = HubClient(hub, "echo")
    try:
        task = client.send("hello")
        admin.script_flush()
        assert client.result("GetTask", {"id": task["id"]}) == task
        assert hub.store._read_by != SCRIPTED
        _paused([admin])
        try:
            assert client.result("GetTask", {"id": task["id"]}) == task
        finally:
            _unpaused([admin])
    finally:
        admin.close()
        close_hub(hub)
        server.stop()
