"""Retention past the cap when a tenant's tasks end at once: the store still keeps at most
``tasks.max_per_tenant`` finished tasks (and a batch) of the tenant, not one more for each
end that came while another forgot its oldest, in this process or on another replica."""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi.hub.store import redis_stores
from murmur_wsgi.hub.store.retention import Retention

from tests.hub.retention_util import ended, sizes

CAP = 3
THREADS = 8
ENDS = 10                   # each thread's


@pytest.fixture
def retention():
    """3 finished tasks per tenant for an hour; each end forgets what it puts past them."""
    return Retention(3600.0, CAP, batch=1)


def end_at_once(each_stores: list) -> None:
    """``THREADS`` threads (spread over ``each_stores``) ending ``ENDS`` tasks each at once."""
    start = threading.Barrier(THREADS)
    failed = []

    def end_many(stores):
        try:
            start.wait(timeout=10)
            for _ in range(ENDS):
                ended(stores, size=10)
        except BaseException as ex:  # noqa: BLE001 - reported by the test
            failed.append(ex)

    threads = [threading.Thread(target=end_many, args=(each_stores[i % len(each_stores)],))
               for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not failed


def test_ends_at_once_keep_the_tenant_at_its_cap(stores):
    end_at_once([stores])
    # NOTE: no sweep ran (``expire_finished``): the ends alone keep the tenant at its cap.
    assert len(sizes(stores, "acme")) <= CAP + 1


@pytest.mark.one_store
def test_ends_at_once_on_two_replicas_keep_the_tenant_at_its_cap(redis_server, retention):
    redis_server.flush()
    replicas = [redis_stores(redis_server.url, timeout_secs=2.0, replica_id=name,
                             retention=retention) for name in ("one", "two")]
    try:
        end_at_once(replicas)
        assert len(sizes(replicas[0], "acme")) <= CAP + 1
    finally:
        for stores in replicas:
            stores.close()


@pytest.mark.one_store
def test_a_batch_another_replica_forgot_first_leaves_no_task_past_the_cap(redis_server,
                                                                           retention):
    """Every batch this replica is given, the other forgets first (its own ends, given the
    same oldest tasks): this one reads the tenant's tasks again until none is past the cap,
    not only until a batch of its own comes back short."""
    redis_server.flush()
    one, two = (redis_stores(redis_server.url, timeout_secs=2.0, replica_id=name,
                             retention=retention) for name in ("one", "two"))
    tasks = one.tasks
    try:
        tasks._forget_after = lambda tenant, task_ids: None     # ends that forget nothing
        for _ in range(CAP + 8):
            ended(one, size=10)
        del tasks._forget_after
        forget = tasks._forget

        def forgotten_first(tenant, task_ids):
            two.tasks._forget(tenant, task_ids)
            return forget(tenant, task_ids)
        tasks._forget = forgotten_first
        ended(one, size=10)
        assert len(sizes(one, "acme")) <= CAP + 1
    finally:
        one.close()
        two.close()
