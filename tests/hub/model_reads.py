"""The reading steps of the hub's model (tests/hub/test_hub_model.py): GetTask, ListTasks
(refused or paged to the end), SubscribeToTask of finished tasks and the push config reads,
each asked of both hubs alike; what they answer is checked against the model's tasks.
"""
from __future__ import annotations

import json

from hypothesis import strategies as st
from hypothesis.stateful import rule

from tests.hub.pair_util import SIDES

FINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
         "TASK_STATE_REJECTED"}
PUSHED = "globex"       # its finished tasks get push configs: its bytes are never reached (a
#                         config's bytes count at the sweep's time too, which differs)
UNKNOWN = "00000000-0000-4000-8000-000000000000"


class Reads:
    """The model's reading rules (mixed into ``HubModel``: ``pair``, ``tasks``, ``prefix``,
    ``_pick``)."""

    @rule(tenant=st.sampled_from(["acme", "globex"]),
          size=st.sampled_from([0, 101, -1, "2", None]),
          token=st.sampled_from(["", "garbage", "earlier", None]),
          history=st.sampled_from([-1, "1", None]))
    def list_refused(self, tenant, size, token, history):
        """ListTasks with a page size, a token or a historyLength out of bounds (or another
        tenant's page token): refused alike, or a page."""
        params = {}
        for key, value in (("pageSize", size), ("historyLength", history)):
            if value is not None:
                params[key] = value
        if token == "earlier":
            token = next((name for name in self.pair.ids["memory"] if name.startswith("token")),
                         "")
        if token is not None:
            params["pageToken"] = token
        answers = self.pair.call(tenant, "mixed", "ListTasks", params)
        self.pair.name_new(answers)
        assert answers["memory"].key() == answers["redis"].key(), (
            params, answers["memory"].raw, answers["redis"].raw)

    @rule(tenant=st.sampled_from(["acme", "globex"]),
          history=st.sampled_from([None, 0, 1, 5, -1]),
          path=st.sampled_from(["own", "mixed", "asks", "history"]), data=st.data())
    def get_task(self, tenant, history, path, data):
        name = self._pick(data) or UNKNOWN
        task = self.tasks.get(name)
        agent_name = task.agent if task is not None and path == "own" else path
        if agent_name == "own":
            agent_name = "mixed"
        params = {"id": name} if history is None else {"id": name, "historyLength": history}
        payload = self.pair.same(tenant, agent_name, "GetTask", params)["memory"].json()
        if history == -1:                       # the task is looked for first
            assert payload["error"]["code"] in (-32001, -32602), payload
            return
        readable = task is not None and task.tenant == tenant and task.agent == agent_name
        if readable and not task.forgotten and task.ended is None:
            assert "result" in payload, payload             # running: never forgotten
        if "error" in payload:
            assert payload["error"]["code"] == -32001, payload
            if readable:
                task.forgotten = True
        else:
            assert readable and not task.forgotten, (name, payload)

    @rule(tenant=st.sampled_from(["acme", "globex"]),
          path=st.sampled_from(["mixed", "asks", "history"]),
          context=st.sampled_from([None, "fixed", "earlier"]),
          status=st.sampled_from([None, "TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
                                  "TASK_STATE_WORKING", "TASK_STATE_REJECTED"]),
          after=st.sampled_from([None, "2000-01-01T00:00:00.000Z", "2100-01-01T00:00:00Z"]),
          page_size=st.integers(1, 4), artifacts=st.sampled_from([None, True, False]),
          history=st.sampled_from([None, 0, 2]), data=st.data())
    def list_tasks(self, tenant, path, context, status, after, page_size, artifacts, history,
                   data):
        params = {"pageSize": page_size}
        if context == "fixed":
            params["contextId"] = f"ctx-{self.prefix}"
        elif context == "earlier" and self.tasks:
            params["contextId"] = self.tasks[self._pick(data)].context
        for key, value in (("status", status), ("statusTimestampAfter", after),
                           ("includeArtifacts", artifacts), ("historyLength", history)):
            if value is not None:
                params[key] = value
        listed, token = [], None
        while True:
            asked = dict(params, pageToken=token) if token else params
            answers = self.pair.same(tenant, path, "ListTasks", asked)
            page = answers["memory"].json()["result"]
            ids = [self.pair.names["memory"][task["id"]] for task in page["tasks"]]
            assert len(ids) <= page_size and not set(ids) & set(listed), (listed, ids)
            listed.extend(ids)
            assert page["totalSize"] >= len(listed), (page, listed)
            token = page["nextPageToken"]
            tokens = {side: answers[side].json()["result"]["nextPageToken"] for side in SIDES}
            if not token:
                assert page["totalSize"] == len(listed), (page, listed)
                break
            assert ids, page
            token = self.pair.name("token", tokens)     # each hub is asked with its own
        for name in listed:
            task = self.tasks[name]
            assert task.tenant == tenant and task.agent == path and not task.forgotten
        if status is None and after is None and context is None:
            self._all_listed(tenant, path, listed)

    def _all_listed(self, tenant: str, path: str, listed: list) -> None:
        """Every task of the tenant's agent not forgotten is listed, newest first."""
        mine = [name for name, task in self.tasks.items()
                if task.tenant == tenant and task.agent == path and not task.forgotten]
        running = {name for name in mine if self.tasks[name].ended is None}
        assert running <= set(listed), (running, listed)
        for name in set(mine) - set(listed):
            self.tasks[name].forgotten = True
        order = {name: i for i, name in enumerate(self.tasks)}
        assert listed == sorted(listed, key=lambda name: -order[name]), listed

    @rule(data=st.data(), tenant=st.sampled_from(["acme", "globex"]))
    def subscribe_finished(self, data, tenant):
        name = self._pick(data, finished=True)
        if name is None:
            return
        task = self.tasks[name]
        answers = self.pair.same(tenant, task.agent, "SubscribeToTask", {"id": name})
        memory = answers["memory"]
        if memory.content_type.startswith("text/event-stream"):
            assert tenant == task.tenant and not task.forgotten
            events = [json.loads(line[len("data: "):]) for line in memory.raw.split("\n")
                      if line.startswith("data: ")]
            last = events[-1]["result"]             # a refused task's: its Task alone
            assert (last.get("statusUpdate") or last["task"])["status"]["state"] in FINAL
        else:
            assert memory.json()["error"]["code"] == -32001
            if tenant == task.tenant:
                task.forgotten = True

    @rule(data=st.data(), tenant=st.sampled_from(["acme", "globex"]),
          method=st.sampled_from(["GetTaskPushNotificationConfig",
                                  "DeleteTaskPushNotificationConfig",
                                  "ListTaskPushNotificationConfigs"]),
          config_id=st.sampled_from(["c1", "c2", "cfg-1", "none"]))
    def read_config(self, data, tenant, method, config_id):
        name = self._pick(data, finished=True, tenant=PUSHED) or UNKNOWN
        task = self.tasks.get(name)
        agent_name = task.agent if task is not None else "mixed"
        params = {"taskId": name} if method.startswith("List") else \
            {"taskId": name, "id": config_id}
        self.pair.same(tenant, agent_name, method, params)
