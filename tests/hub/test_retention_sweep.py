"""The stale sweep's retention on Redis (``expire_finished``): its work goes by tenants.

Every replica runs it every ``redis.sweep_interval_secs``. It looks at the ``done`` of each
tenant the hub's ``tenants`` names (listed at a tenant's first end in a process) and of
each tenant of hub.yaml, never at every key of the Redis: a ``SCAN`` of the whole keyspace
cost every replica's sweep a Redis command per thousand keys, whoever's they were. Counted
with Redis's own ``INFO commandstats``, on every node of a cluster.
"""
from __future__ import annotations

import uuid

import pytest

from murmur_wsgi.hub.store import redis_stores
from murmur_wsgi.hub.store.redis_keys import TENANTS, tenant_prefix
from murmur_wsgi.hub.store.retention import Retention
from murmur_wsgi.hub.task import COMPLETED, HubTask
from murmur_wsgi.wire.task import text_part

from tests.hub.conftest import wait_until

pytestmark = pytest.mark.cluster          # on one Redis and on a Redis Cluster

# Keys of tasks and contexts the sweep need not see. PERF: 2,000 (4,002 keys), not 20,000:
# a sweep that SCANs sends at least one on every node whatever the keys (about five on one
# Redis), and the test asserts none; twenty thousand were 4 s of pipelining on a cluster.
OTHER_KEYS = 2_000


def _clients(server) -> list:
    """A client of each node (a cluster's), or of the one server."""
    return [node.client() for node in server.nodes] if hasattr(server, "nodes") \
        else [server.client()]


def _calls(server) -> dict:
    """Every command's calls so far (a script's own commands among them), summed over the
    nodes (INFO left out)."""
    total: dict[str, int] = {}
    for client in _clients(server):
        for name, stats in client.info("commandstats").items():
            if name != "cmdstat_info":
                total[name] = total.get(name, 0) + stats["calls"]
        client.close()
    return total


def _finish(stores, tenant: str) -> HubTask:
    message_id = uuid.uuid4().hex
    task = HubTask(str(uuid.uuid4()), "ctx", tenant, "echo", message_id,
                   {"messageId": message_id, "role": "ROLE_USER", "parts": [text_part("hi")]})
    stores.tasks.create(task, task.task_event())
    stores.tasks.end(task.id, COMPLETED, None, None, [])
    return task


@pytest.fixture
def sweeping(redis_server):
    """Stores on the flushed Redis whose tasks go 0.3 s after their end; hub.yaml names
    ``acme`` alone."""
    redis_server.flush()
    found = redis_stores(redis_server.url, timeout_secs=5.0, replica_id="me",
                         retention=Retention(0.3, 1000, {"acme": {}}, batch=1))
    yield found
    found.close()


def test_the_sweep_s_commands_go_by_tenants_not_by_keys(redis_server, sweeping):
    sweeping.tasks._keep = Retention(60.0, 1000, {"acme": {}}, batch=1)   # none due
    for tenant in ("acme", "beta"):
        _finish(sweeping, tenant)
    client = redis_server.client()
    pipe = client.pipeline(transaction=False)
    for i in range(OTHER_KEYS):   # what many tasks leave: a claim and a context each
        prefix = tenant_prefix(f"t{i % 50}")
        pipe.set(f"{prefix}msg:echo:{i}", "x")
        pipe.zadd(f"{prefix}ctx:echo:c{i}", {"x": 1})
    pipe.execute()
    client.close()
    sweeping.tasks.expire_finished()        # (Redis learns the script: EVALSHA from now on)
    before = _calls(redis_server)
    sweeping.tasks.expire_finished()
    after = _calls(redis_server)
    spent = {name: n - before.get(name, 0) for name, n in after.items()
             if n > before.get(name, 0)}
    # Before: a SCAN per thousand keys (41 on one Redis for 40,002 keys, about 5 for these 4,002),
    # and as many more with every key added; now the hub's tenants and one DOOMED script per
    # tenant.
    assert spent.get("cmdstat_scan", 0) == 0
    assert spent["cmdstat_smembers"] == 1
    assert spent["cmdstat_evalsha"] == 2                # DOOMED, for acme and beta


def test_a_tenant_that_stopped_writing_is_swept_listed_or_in_hub_yaml(redis_server, sweeping):
    listed = _finish(sweeping, "beta")        # not in hub.yaml: listed at its end
    older = _finish(sweeping, "acme")
    client = redis_server.client()
    assert client.smembers(TENANTS) == {"acme", "beta"}
    client.srem(TENANTS, "acme")    # acme's end as a hub before ``tenants`` made it: unlisted
    client.close()
    tasks = sweeping.tasks

    def swept() -> bool:
        tasks.expire_finished()
        return all(tasks.get(t.tenant, "echo", t.id) is None for t in (listed, older))

    wait_until(swept)
    assert tasks.list("beta", "echo").total == tasks.list("acme", "echo").total == 0
