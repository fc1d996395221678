"""A ListTasks page is bounded in bytes (``limits.list_bytes``): it ends before the first task
past it, at least one task, and its nextPageToken names the rest.

Without the bound a page read its tasks whole however large they were: 100 refused tasks of
a 900 KB message (no run needed) made one 90 MB answer, 0.27 GB of a memory store's worker
and 0.63 GB on Redis, for one request.
"""
from __future__ import annotations

import collections
import uuid

import redis

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.task import REJECTED, HubTask
from murmur_wsgi.wire.task import now_ms, rfc3339

from tests.hub.conftest import HubClient, close_hub, hub_config

MIB = 1024 ** 2
DEFAULT = 16 * MIB
HOUR_MS = 3_600_000


def _large(hub, count: int, size: int, age_ms: int = 0) -> list[str]:
    """``count`` refused tasks of acme's echo, each a message of ``size`` bytes of text, their
    status ``age_ms`` old, oldest first: their ids."""
    ids = []
    for i in range(count):
        message = {"messageId": f"m{i}", "role": "ROLE_USER", "parts": [{"text": "x" * size}]}
        task = HubTask(str(uuid.uuid4()), "ctx", "acme", "echo", f"m{i}", message)
        task.set_state(REJECTED, None)
        task.status_ms -= age_ms
        hub.store.create(task, task.task_event(), bind=False)
        ids.append(task.id)
    return ids


def _pages(rpc, **params) -> list[dict]:
    pages, token = [], ""
    while True:
        response = rpc.call("ListTasks", {"pageSize": 100, "pageToken": token, **params})
        pages.append((len(response.get_data()), response.get_json()["result"]))
        token = pages[-1][1]["nextPageToken"]
        if not token:
            return pages


def test_a_page_ends_before_the_first_task_past_list_bytes(store, monkeypatch):
    """At the default (16 MiB), 30 tasks of a 1 MiB message are listed 15 a page at most,
    every one of them once, newest first; each answer is under the bound, and on Redis no
    record is read but the page's."""
    hub = create_hub(hub_config(store=store))
    read = collections.Counter()
    parse = redis.Redis.parse_response

    def counted(self, connection, command_name, **options):
        read[command_name.upper()] += 1
        return parse(self, connection, command_name, **options)

    try:
        made = _large(hub, 30, MIB)
        monkeypatch.setattr(redis.Redis, "parse_response", counted)
        pages = _pages(HubClient(hub), includeArtifacts=True)
        assert read["HGETALL"] == (30 if hub.store.shared else 0)
        listed = [task["id"] for _, page in pages for task in page["tasks"]]
        assert listed == made[::-1]
        assert [len(page["tasks"]) for _, page in pages] == [15, 15]
        assert all(size < DEFAULT for size, _ in pages)
        assert all(page["totalSize"] == 30 for _, page in pages)
    finally:
        close_hub(hub)


def test_a_task_larger_than_the_tenants_bound_is_listed_alone(store):
    """A tenant's own bound; a task past it alone is still listed, one a page, and a page of
    smaller tasks holds what fits; so does a page of the tasks changed since a time (the
    stores' other path: most tasks are older)."""
    config = hub_config(store=store)
    config["tenants"]["acme"]["limits"] = {"list_bytes": 100_000}
    hub = create_hub(config)
    try:
        rpc = HubClient(hub)
        small = _large(hub, 6, 30_000, age_ms=HOUR_MS)
        large = _large(hub, 2, 150_000)
        pages = _pages(rpc)
        assert [[task["id"] for task in page["tasks"]] for _, page in pages] == \
            [[large[1]], [large[0]], small[:2:-1], small[2::-1]]
        since = _pages(rpc, statusTimestampAfter=rfc3339(now_ms() - HOUR_MS // 2))
        assert [[task["id"] for task in page["tasks"]] for _, page in since] == \
            [[large[1]], [large[0]]]
        assert [page["totalSize"] for _, page in since] == [2, 2]
    finally:
        close_hub(hub)


def test_a_running_tasks_bytes_are_its_history_and_artifacts_on_every_store(store):
    """A running task counts its history's and artifacts' JSON (a Redis record's ``hist`` and
    ``arts``), on every store: two running tasks whose sums fit ``list_bytes`` exactly are
    one page, one byte less ends it after the first; a context's turns read as many. Before,
    the memory store counted a running task's whole wire form (its ids and status too) and
    listed one task where Redis listed two."""
    from murmur_wsgi.wire.encode import compact_utf8

    hub = create_hub(hub_config(store=store))
    try:
        rpc = HubClient(hub, agent="held")
        made = [rpc.send("gate-running " + "y" * 1_000, context_id="turns",
                         configuration={"returnImmediately": True}) for _ in range(2)]
        read = [rpc.result("GetTask", {"id": task["id"]}) for task in made]
        assert all(task["status"]["state"] == "TASK_STATE_WORKING" for task in read)
        sizes = [len(compact_utf8(task["history"]).encode()) + len("[]") for task in read]
        for bound, count in ((sum(sizes), 2), (sum(sizes) - 1, 1)):
            page = hub.store.list("acme", "held", max_bytes=bound)
            assert [task.id for task in page.tasks] == [t["id"] for t in made[::-1]][:count]
            turns = hub.store.context_tasks("acme", "held", "turns", 5, bound)
            assert [task.id for task in turns] == [t["id"] for t in made][2 - count:]
    finally:
        close_hub(hub)
