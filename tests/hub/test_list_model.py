"""ListTasks against a model: for any tasks and any filters, every store pages exactly the
list the text describes.

Each example sends an agent of its own a few blocking messages (finished at once:
COMPLETED, or FAILED by the demo agent's ``/fail``) in a few contexts, then lists them
with any ``contextId``, ``status``, ``statusTimestampAfter`` (one of the tasks' own status
times, a millisecond either side, or before them all) and ``pageSize``, following
``nextPageToken`` to the end. The model is what the tasks say of themselves (GetTask):
the tasks whose context and state match and whose status time is after the cutoff,
newest first by creation. Every page holds at most ``pageSize`` tasks and none twice, the
last page's token is empty, each page's ``totalSize`` is the model's count, and the pages
together are the model's list; each task listed is the one GetTask answers, its history
trimmed by the same ``historyLength`` and its artifacts there only with
``includeArtifacts: true``. On the memory store and on a redis-server.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_wsgi.hub import create_hub
from tests.hub.conftest import KEY_A, HubClient, close_hub, hub_config, module_store, sha

pytestmark = pytest.mark.one_store          # the module's own hubs: memory and Redis

AGENTS = 60                                 # one per example (with a few to spare)
EXAMPLES = 50
STATES = ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED"]


@pytest.fixture(scope="module", params=["memory", "redis"])
def listing(request):
    store = module_store(request)
    agents = {f"a{i}": {"agent": "demo", "publish": True} for i in range(AGENTS)}
    config = hub_config(store=store, limits={"concurrency": 100, "rate_per_minute": 1_000_000},
                        tenants={"acme": {"api_keys": [sha(KEY_A)], "agents": agents}})
    hub = create_hub(config)
    yield {"hub": hub, "next": iter(range(AGENTS))}
    close_hub(hub)


def _ms(timestamp: str) -> int:
    when = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return round(when.timestamp() * 1000)


def _rfc3339(ms: int) -> str:
    when = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


sends = st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=8)
queries = st.lists(st.fixed_dictionaries({
    "context": st.none() | st.integers(0, 3),
    "state": st.none() | st.sampled_from(STATES + ["TASK_STATE_WORKING"]),
    "after": st.none() | st.tuples(st.integers(0, 7), st.integers(-1, 1)) | st.just("early"),
    "page_size": st.integers(1, 5),
    "artifacts": st.none() | st.booleans(),
    "history": st.none() | st.integers(0, 3),
}), min_size=1, max_size=4)


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(sent=sends, asked=queries)
def test_list_tasks_pages_the_model(listing, sent, asked):
    rpc = HubClient(listing["hub"], agent=f"a{next(listing['next'])}")
    tasks = []                              # oldest first: (id, context, state, status ms)
    for context, fails in sent:
        params = {"message": {"messageId": f"m{len(tasks)}-{rpc.agent}", "role": "ROLE_USER",
                              "contextId": f"c{context}",
                              "parts": [{"text": "/fail no" if fails else "hi"}]}}
        task = rpc.result("SendMessage", params)["task"]
        read = rpc.result("GetTask", {"id": task["id"]})
        tasks.append((read["id"], read["contextId"], read["status"]["state"],
                      _ms(read["status"]["timestamp"])))
        assert read["status"]["state"] == STATES[fails]
    for query in asked:
        params, cutoff = {"pageSize": query["page_size"]}, None
        if query["context"] is not None:
            params["contextId"] = f"c{query['context']}"
        if query["state"] is not None:
            params["status"] = query["state"]
        if query["after"] == "early":
            cutoff = tasks[0][3] - 60_000
        elif query["after"] is not None:
            which, shift = query["after"]
            cutoff = tasks[which % len(tasks)][3] + shift
        if cutoff is not None:
            params["statusTimestampAfter"] = _rfc3339(cutoff)
        if query["artifacts"] is not None:
            params["includeArtifacts"] = query["artifacts"]
        trim = {} if query["history"] is None else {"historyLength": query["history"]}
        params.update(trim)
        expected = [task_id for task_id, context, state, ms in reversed(tasks)
                    if params.get("contextId", context) == context
                    and params.get("status", state) == state
                    and (cutoff is None or ms > cutoff)]
        pages, token = [], None
        while True:
            page = rpc.result("ListTasks", dict(params, pageToken=token) if token else params)
            assert page["totalSize"] == len(expected), (params, page, tasks)
            assert page["pageSize"] == query["page_size"]
            ids = [task["id"] for task in page["tasks"]]
            for listed in page["tasks"]:        # each as GetTask answers it, trimmed alike
                read = rpc.result("GetTask", dict(trim, id=listed["id"]))
                if not query["artifacts"]:
                    read.pop("artifacts", None)
                assert listed == read, (params, listed, read)
            assert len(ids) <= query["page_size"] and (ids or not expected), (params, page)
            pages.extend(ids)
            token = page["nextPageToken"]
            if not token:
                break
            assert len(pages) < len(expected), (params, pages, expected)
        assert pages == expected, (params, tasks)
