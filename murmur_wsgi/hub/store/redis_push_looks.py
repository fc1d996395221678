"""A dispatcher's look at push configs on Redis: each tenant's, by the ``DUE`` script.

The names listed (``listed``: each tenant's first, in ``push:active:<tenant>``;
``<tenant>/<task>/<config>``) are grouped by tenant and
sent to the tenant's slot in batches, one round of batches a round trip (a pipeline;
on a cluster, a round trip per node). A look that wants at most ``most`` pending
configs of a tenant stops at them: a tenant delivers at most ``TENANT_DELIVERIES``
configs at once, so no more of its backlog is read than its slots can take.
"""
from __future__ import annotations

from murmur_wsgi.hub.store.redis_events import WATCH_MS
from murmur_wsgi.hub.store.redis_keys import (PUSH_ACTIVE, PUSH_TENANTS, configs_key,
                                              events_key, lease_key, member,
                                              push_active_key, split_member, task_key)
from murmur_wsgi.wire.task import now_ms

DUE_BATCH = 256                # configs one DUE script looks at, at most
LISTED_PER_TENANT = 1024       # a tenant's configs a full look reads, the first listed


def listed(redis, tenants=None, page: int = 0) -> tuple[list, list]:
    """``(names, tenants with more)``: the names a full look reads: of each tenant, the
    ``LISTED_PER_TENANT`` listed first (a look wants no more than its slots' worth of them:
    ``looked``), and an older hub's ``push:active``, in one round trip after the tenants'
    (the hub's slot); the tenants (as listed) whose list goes on past them. With
    ``tenants``: those tenants' ``page``-th names (the first is 0; no older ones).

    PERF: every name was read: a tenant's backlog of 30,000 configs (a message refused at
    admission saves its config too) cost each worker of every replica 88 ms of a look
    every second, its other greenlets waiting (5.6 ms now); a tenant's next names are
    read when its first ones leave the list, or do not fill its slots (``more``)."""
    first = tenants is None
    start = page * LISTED_PER_TENANT
    if first:
        tenants = sorted(redis.smembers(PUSH_TENANTS))
    pipe = redis.pipeline(transaction=False)
    if first:
        pipe.smembers(PUSH_ACTIVE)
    for quoted in tenants:
        pipe.zrange(push_active_key(quoted), start, start + LISTED_PER_TENANT - 1)
    found = pipe.execute()
    older = found.pop(0) if first else ()
    full = [quoted for quoted, names in zip(tenants, found) if len(names) == LISTED_PER_TENANT]
    return (list(dict.fromkeys([name for names in found for name in names] + sorted(older))),
            full)


def more(tenants: list, pending: dict, most: int) -> list:
    """Of ``tenants`` (as listed) whose list goes on past the names read, those whose names
    read left slots free: ``pending`` of them (by tenant) fewer than ``most``.

    NOTE: a tenant's first names all waiting (caught up on running tasks), or all
    skipped, would otherwise hide its later ones, due or not, from every full look for
    as long as they stay listed."""
    return [quoted for quoted in tenants
            if pending.get(split_member(quoted + "/")[0], 0) < most]


def by_tenant(names: list) -> dict[str, list]:
    """``{tenant as its names write it: its names}`` of configs' hub-wide names."""
    found: dict[str, list] = {}
    for name in names:
        found.setdefault(name.partition("/")[0], []).append(name)
    return found


def listing(names: list) -> list:
    """The commands that list ``names`` (configs' hub-wide names): each in its tenant's
    ``push:active:<tenant>`` (where it was, if it is), then its tenant in ``push:tenants``:
    a tenant is listed whenever one of its configs is."""
    tenants = by_tenant(names)
    score = now_ms()
    commands = [("ZADD", push_active_key(quoted), "NX",
                 *(part for name in own for part in (score, name)))
                for quoted, own in tenants.items()]
    return commands + [("SADD", PUSH_TENANTS, *tenants)]


def key_of(name: str) -> tuple[str, str, str]:
    """``(tenant, task id, config id)`` of a hub-wide name ``<tenant>/<task>/<config>``."""
    tenant, local = split_member(name)
    task_id, _, config_id = local.rpartition("/")
    return tenant, task_id, config_id


def looked(redis, due, tenants: dict, names, skipped: set, most: int = 0,
           pending: dict | None = None) -> tuple[list, dict]:
    """``([(tenant, the DUE script's answer)], {tenant: names not looked at})`` for
    ``names`` (each config's tenant recorded in ``tenants``); none of ``skipped``
    (``<task>/<config>``) is due or waited on. With ``most``, a tenant's configs are
    looked at until ``most`` are found pending only (``pending``: those of each tenant
    found before, in its earlier names): the rest stay listed as they are, for a later
    look.

    PERF: a backlog of configs due behind a slow receiver costs each look a batch of
    its tenant's, not the script's work on every one (15,000 of them, looked at whole
    every second, were 55,000 of Redis's commands a second on each replica)."""
    by_tenant: dict[str, list] = {}
    for name in names:
        tenant, task_id, config_id = key_of(name)
        by_tenant.setdefault(tenant, []).append((task_id, config_id))
        tenants[(task_id, config_id)] = tenant
    out, rest = [], {}
    found = {tenant: (pending or {}).get(tenant, 0) for tenant in by_tenant}
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
