"""A primary that pauses writes (``CLIENT PAUSE … WRITE``, as ``FAILOVER`` and ``CLUSTER
FAILOVER`` pause one) still answers a task's reads: the record is read by a read-only
script (``EVALSHA_RO``, ``EVAL_RO`` once Redis forgot it), which such a pause lets through,
where it holds ``EVALSHA``. A Redis that knows no ``EVALSHA_RO`` (before 7.0) is read by
``EVALSHA``, as before."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.store.redis_reads import SCRIPTED

from tests.hub.conftest import HubClient, close_hub, redis_hub
from tests.redis_util import RedisServer

pytestmark = pytest.mark.cluster


def _primaries(server) -> list:
    """A client of each primary of ``server`` (a redis-server, or a cluster's nodes)."""
    nodes = getattr(server, "nodes", None)
    return [node.client() for node in nodes] if nodes else [server.client()]


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
        for primary in primaries:
            primary.execute_command("CLIENT", "PAUSE", 30_000, "WRITE")
        try:
            assert client.result("GetTask", {"id": task["id"]}) == task
        finally:
            for primary in primaries:
                primary.execute_command("CLIENT", "UNPAUSE")
        for primary in primaries:
            primary.script_flush()
            primary.execute_command("CLIENT", "PAUSE", 30_000, "WRITE")
        try:
            assert client.result("GetTask", {"id": task["id"]}) == task      # EVAL_RO
        finally:
            for primary in primaries:
                primary.execute_command("CLIENT", "UNPAUSE")
    finally:
        for primary in primaries:
            primary.close()
        close_hub(hub)


@pytest.mark.parametrize("without", ["renamed", "acl"])
def test_a_redis_without_read_only_scripts_is_read_by_evalsha(tmp_path, without):
    """A redis-server whose ``EVALSHA_RO`` and ``EVAL_RO`` are gone (``rename-command``, as
    on a Redis before 7.0, which has neither), or whose ACL allows the hub's user
    ``EVALSHA`` but not them: the hub reads by ``EVALSHA`` instead, from its first read on
    (its first answered too: the refusal is not the client's)."""
    renamed = ("--rename-command", "EVALSHA_RO", "", "--rename-command", "EVAL_RO", "")
    server = RedisServer(tmp_path, extra=renamed if without == "renamed" else ()).start()
    admin = server.client()
    if without == "acl":
        admin.execute_command("ACL", "SETUSER", "default", "-evalsha_ro", "-eval_ro")
    hub = redis_hub(server)
    client = HubClient(hub, "echo")
    try:
        task = client.send("hello")
        assert client.result("GetTask", {"id": task["id"]}) == task
        assert hub.store._record_read == SCRIPTED
        assert client.result("GetTask", {"id": task["id"]}) == task
    finally:
        admin.close()
        close_hub(hub)
        server.stop()
