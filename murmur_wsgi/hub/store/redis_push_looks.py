"""A dispatcher's look at push configs on Redis: each tenant's, by the ``DUE`` script.

The names of ``push:active`` (``<tenant>/<task>/<config>``) are grouped by tenant and
sent to the tenant's slot in batches, one round of batches a round trip (a pipeline;
on a cluster, a round trip per node). A look that wants at most ``most`` pending
configs of a tenant stops at them: a tenant delivers at most ``TENANT_DELIVERIES``
configs at once, so no more of its backlog is read than its slots can take.
"""
from __future__ import annotations

from murmur_wsgi.hub.store.redis_events import WATCH_MS
from murmur_wsgi.hub.store.redis_keys import (configs_key, events_key, lease_key, member,
                                              split_member, task_key)

DUE_BATCH = 256                # configs one DUE script looks at, at most


def key_of(name: str) -> tuple[str, str, str]:
    """``(tenant, task id, config id)`` of a hub-wide name ``<tenant>/<task>/<config>``."""
    tenant, local = split_member(name)
    task_id, _, config_id = local.rpartition("/")
    return tenant, task_id, config_id


def looked(redis, due, tenants: dict, names, skipped: set, most: int = 0) -> tuple[list, dict]:
    """``([(tenant, the DUE script's answer)], {tenant: names not looked at})`` for
    ``names`` (each config's tenant recorded in ``tenants``); none of ``skipped``
    (``<task>/<config>``) is due or waited on. With ``most``, a tenant's configs are
    looked at until ``most`` are found pending only: the rest stay listed as they are,
    for a later look.

    PERF: a backlog of configs due behind a slow receiver costs each look a batch of
    its tenant's, not the script's work on every one (15,000 of them, looked at whole
    every second, were 55,000 of Redis's commands a second on each replica)."""
    by_tenant: dict[str, list] = {}
    for name in names:
        tenant, task_id, config_id = key_of(name)
        by_tenant.setdefault(tenant, []).append((task_id, config_id))
        tenants[(task_id, config_id)] = tenant
    out, rest, found = [], {}, dict.fromkeys(by_tenant, 0)
    at = dict.fromkeys(by_tenant, 0)          # each tenant's next batch: where it starts
    while at:
        calls: list[tuple] = []
        for tenant, start in sorted(at.items()):
            keys, args = [], [WATCH_MS, most - found[tenant] if most else 0]
            for task_id, config_id in by_tenant[tenant][start:start + DUE_BATCH]:
                local = f"{task_id}/{config_id}"
                keys += [configs_key(tenant, task_id), task_key(tenant, task_id),
                         events_key(tenant, task_id), lease_key(tenant, task_id, config_id)]
                args += [local, "1" if local in skipped else "0"]
            calls.append((tenant, keys, args))
        for (tenant, _, args), answer in zip(calls, _answers(redis, due, calls)):
            out.append((tenant, answer))
            found[tenant] += len(answer[0])
            at[tenant] += DUE_BATCH
            if most and found[tenant] >= most:
                # The script stopped after the config that made ``most``: the batch's
                # names past it, and the tenant's later batches, were not looked at.
                after = args.index(answer[0][-1][0], 2) // 2
                left = args[2 + 2 * after::2] + [
                    f"{t}/{c}" for t, c in by_tenant[tenant][at[tenant]:]]
                if left:
                    rest[tenant] = [member(tenant, local) for local in left]
                del at[tenant]
            elif at[tenant] >= len(by_tenant[tenant]):
                del at[tenant]
    return out, rest


def _answers(redis, due, calls: list) -> list:
    """The DUE script's answer to each ``(tenant, keys, args)``, in one round trip."""
    if len(calls) == 1:
        return [due(keys=calls[0][1], args=calls[0][2])]
    pipe = redis.pipeline(transaction=False)
    for _, keys, args in calls:
        due(keys=keys, args=args, client=pipe)
    return pipe.execute()                   # NOTE: on a cluster, a round trip per node
