"""What a store keeps of a tenant's finished tasks, read for retention's tests; a task ended
in one call."""
from __future__ import annotations

import uuid

from murmur_wsgi.hub.store.redis_keys import bytes_key, sizes_key
from murmur_wsgi.hub.task import COMPLETED, REJECTED, HubTask
from murmur_wsgi.wire.task import text_part


def sizes(stores, tenant: str) -> dict:
    """The bytes the store counts for each of the tenant's finished tasks, by id."""
    tasks = stores.tasks
    if not stores.shared:
        return {task_id: size for task_id, (_, size) in tasks._finished.get(tenant, {}).items()}
    return {task_id: int(size) for task_id, size in tasks._redis.hgetall(sizes_key(tenant)).items()}


def total(stores, tenant: str) -> int:
    """The tenant's sum as the store keeps it (Redis: its ``bytes`` key)."""
    if not stores.shared:
        return stores.tasks._finished_bytes.get(tenant, 0)
    return int(stores.tasks._redis.get(bytes_key(tenant)) or 0)


def ended(stores, tenant="acme", *, size=10_000, state=COMPLETED, events=()) -> HubTask:
    """A task of ``tenant`` whose message holds ``size`` characters, ended in ``state``
    (REJECTED: refused at its creation) with ``events`` before its final one."""
    message_id = uuid.uuid4().hex
    task = HubTask(str(uuid.uuid4()), "ctx", tenant, "echo", message_id,
                   {"messageId": message_id, "role": "ROLE_USER",
                    "parts": [text_part("x" * size)]})
    if state == REJECTED:
        task.set_state(REJECTED, "refused")
        stores.tasks.create(task, task.task_event(), bind=False)
        return task
    stores.tasks.create(task, task.task_event())
    stores.tasks.start(task.id)
    for event in events:
        assert stores.tasks.append(task.id, event)
    assert stores.tasks.end(task.id, state, None, None, []) is not None
    return task


def kept(stores, task) -> bool:
    return stores.tasks.get(task.tenant, task.agent, task.id) is not None


def keys_of(stores, task_id: str) -> list:
    """What the store still holds of a task: its keys (Redis), or its entries (memory)."""
    tasks = stores.tasks
    if not stores.shared:
        return [name for name, held in (("task", tasks._tasks), ("events", tasks._events),
                                        ("expiry", tasks._expiry), ("mark", tasks._marks))
                if task_id in held]
    return list(tasks._redis.scan_iter(match=f"*{task_id}*"))
