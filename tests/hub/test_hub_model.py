"""The hub on the memory store and on Redis, asked the same random calls, answers alike, and
both keep to a model of what a client was told.

Each example starts two hubs of one configuration (two tenants, retention caps low enough
that tasks are forgotten within the example, push on, admission of 3 runs at once), one on
the memory store and one on a flushed redis-server, and makes the same calls to both
through their WSGI apps (tests/hub/pair_util.py names the ids each generates alike): new
messages (blocking or not, in a new, a given or an earlier context, a messageId sent
before, the same one twice at once, a ``taskId``), to agents that answer, fail, refuse, ask
for input, tell the context's earlier turns or hold until their gate opens; GetTask with
any ``historyLength``; ListTasks with every filter and page size (pages cut by
``limits.list_bytes`` too), its tokens followed, and out of bounds; CancelTask of running,
finished, unknown and the other tenant's tasks; push configs created, read, listed and
deleted (on one tenant's finished tasks: a config's bytes count when the sweep comes, at
a time of each hub's own); SubscribeToTask of finished tasks (the reading steps:
tests/hub/model_reads.py). Every answer is byte for byte the same on both stores, and the
model holds:

- a task is readable from its acknowledgement until retention forgets it, and then never
  again; a running task is never forgotten; a tenant's forgotten finished tasks are its
  oldest by end, and it keeps at most ``max_per_tenant`` finished, its newest always;
- another tenant's ids, and another agent's, are the text's TaskNotFoundError;
- ListTasks pages neither skip nor repeat a task, each page's ``totalSize`` is their count,
  and together they are the readable tasks that match, newest first.
"""
from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from murmur_wsgi.hub import create_hub
from tests.hub.agents import gate
from tests.hub.conftest import KEY_A, KEY_B, agent, close_hub, hub_config, sha, wait_until
from tests.hub.model_reads import FINAL, PUSHED, UNKNOWN, Reads
from tests.hub.pair_util import SIDES, Pair

pytestmark = pytest.mark.one_store          # the module's own hubs: memory and Redis

CAPS = {"acme": 4, "globex": 3}             # tasks.max_per_tenant
MAX_BYTES = 5_000                           # tasks.max_bytes_per_tenant of acme
CONCURRENCY = 3
LIST_BYTES = 3_000                          # limits.list_bytes: a page of two or three tasks
HISTORY_BYTES = 2_500                       # limits.history_bytes: a context's newest turns
HOOK = "https://hooks.example.com/a2a"
PUSH_SECRET = "push-master-secret-for-model-tests-0123456"
KINDS = ["echo", "fail", "hold", "rejects", "asks", "history"]


def config(store: str) -> dict:
    agents = {"mixed": agent("tests.hub.agents:mixed"),
              "rejects": agent("tests.hub.agents:rejects"),
              "asks": agent("tests.hub.agents:asks"),
              "history": agent("tests.hub.agents:history")}
    return hub_config(
        store=store, limits={"concurrency": CONCURRENCY, "rate_per_minute": 1_000_000,
                             "run_timeout_secs": 30, "list_bytes": LIST_BYTES,
                             "history_bytes": HISTORY_BYTES},
        tasks={"max_per_tenant": CAPS["acme"], "max_bytes_per_tenant": MAX_BYTES},
        push={"enabled": True, "secret": PUSH_SECRET},
        tenants={"acme": {"api_keys": [sha(KEY_A)], "agents": agents},
                 "globex": {"api_keys": [sha(KEY_B)], "agents": agents,
                            "tasks": {"max_per_tenant": CAPS["globex"],
                                      "max_bytes_per_tenant": "1Mi"}}})


class Task:
    """What a client was told of a task: whose it is, and when it ended."""

    def __init__(self, name, tenant, agent, context, message_id, gate_name=None):
        self.name, self.tenant, self.agent = name, tenant, agent
        self.context, self.message_id, self.gate = context, message_id, gate_name
        self.ended = None                   # its place among its tenant's ends
        self.forgotten = False


class HubModel(Reads, RuleBasedStateMachine):
    redis = None                            # the module's redis-server (set by the test)

    def __init__(self):
        super().__init__()
        self.redis.flush()
        hubs = {"memory": create_hub(config("memory")),
                "redis": create_hub(config(self.redis.url))}
        self.pair = Pair(hubs, {"acme": {"X-API-Key": KEY_A}, "globex": {"X-API-Key": KEY_B}})
        self.tasks: dict[str, Task] = {}
        self.ends = 0
        self.prefix = uuid.uuid4().hex[:8]
        self.sent = 0
        self.configs: dict[str, set] = {}   # task name -> push config ids (set by us)

    def teardown(self):
        for task in self.tasks.values():
            if task.gate is not None:
                gate(task.gate).set()
        for hub in self.pair.hubs.values():
            close_hub(hub)

    # --- what a step picks ---------------------------------------------------------------

    def _pick(self, data, *, finished=None, running=None, tenant=None):
        names = [name for name, task in self.tasks.items()
                 if (finished is None or (task.ended is not None) == finished)
                 and (tenant is None or task.tenant == tenant)
                 and (running is None or (task.ended is None) == running)]
        return data.draw(st.sampled_from(names)) if names else None

    def _ended(self, task: Task) -> None:
        self.ends += 1
        task.ended = self.ends

    def _wait_final(self, task: Task) -> None:
        """Wait until both hubs have ended the task's run (its end written, and what the end
        forgets forgotten: an end the client did not see)."""
        for side in SIDES:
            hub = self.pair.hubs[side]
            task_id = self.pair.ids[side][task.name]

            def ended():
                run = hub.runs.get(task_id)
                stored = hub.store.get(task.tenant, task.agent, task_id)
                return (run is None or run.ended) and (stored is None or stored.terminal)
            wait_until(ended)

    # --- messages ------------------------------------------------------------------------

    @rule(tenant=st.sampled_from(["acme", "globex"]), kind=st.sampled_from(KINDS),
          blocking=st.booleans(), context=st.sampled_from([None, "fixed", "earlier"]),
          again=st.booleans(), history=st.sampled_from([None, 0, 1, 3]), data=st.data(),
          pad=st.sampled_from([0, 0, 1_300]))
    def send(self, tenant, kind, blocking, context, again, history, data, pad=0):
        """A message (a held one's text ``pad`` characters longer: two of them fill about
        ``limits.list_bytes``)."""
        agent_name = kind if kind in ("rejects", "asks", "history") else "mixed"
        self.sent += 1
        earlier = [t for t in self.tasks.values() if t.tenant == tenant
                   and t.agent == agent_name]
        message_id = f"m-{self.prefix}-{self.sent}"
        if again and earlier:
            message_id = data.draw(st.sampled_from(earlier)).message_id
        gate_name = f"g-{self.prefix}-{self.sent}" + "p" * pad
        text = {"echo": f"hi {self.sent}", "fail": "fail", "hold": f"hold {gate_name}"}.get(
            kind, "anything")
        message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
        if context == "fixed":
            message["contextId"] = f"ctx-{self.prefix}"
        elif context == "earlier" and earlier:
            message["contextId"] = data.draw(st.sampled_from(earlier)).context
        params = {"message": message}
        configuration = {}
        if kind == "hold" or not blocking:
            configuration["returnImmediately"] = True
        if history is not None:
            configuration["historyLength"] = history
        if configuration:
            params["configuration"] = configuration
        answers = self.pair.same(tenant, agent_name, "SendMessage", params)
        got = {side: answers[side].json()["result"]["task"] for side in SIDES}
        self.pair.name("ctx", {side: got[side]["contextId"] for side in SIDES})
        name = self.pair.name("task", {side: got[side]["id"] for side in SIDES})
        if name in self.tasks:                                   # the messageId's task, as it stands
            assert self.tasks[name].message_id == message_id
            assert not self.tasks[name].forgotten
            return
        task = Task(name, tenant, agent_name, self.pair.names["memory"].get(
            got["memory"]["contextId"]), message_id,
            gate_name if kind == "hold" else None)
        self.tasks[name] = task
        state = got["memory"]["status"]["state"]
        if state in FINAL:
            self._ended(task)
        elif kind != "hold":
            self._wait_final(task)
            self._ended(task)
        if task.context is None:
            task.context = got["memory"]["contextId"]

    @rule(tenant=st.sampled_from(["acme", "globex"]),
          kinds=st.lists(st.sampled_from(["echo", "fail", "history"]), min_size=2, max_size=4),
          data=st.data())
    def send_several(self, tenant, kinds, data):
        """Blocking messages one after another: retention's caps are reached within a few
        steps."""
        for kind in kinds:
            self.send(tenant=tenant, kind=kind, blocking=True, context="fixed", again=False,
                      history=None, data=data)

    @rule(tenant=st.sampled_from(["acme", "globex"]), data=st.data())
    def hold_two_long(self, tenant, data):
        """Two runs held on long messages: running tasks that fill a ListTasks page's
        ``limits.list_bytes`` together."""
        running = [t for t in self.tasks.values() if t.tenant == tenant and t.ended is None]
        for _ in range(min(2, CONCURRENCY - len(running))):
            self.send(tenant=tenant, kind="hold", blocking=False, context="fixed", again=False,
                      history=None, data=data, pad=1_300)

    @rule(tenant=st.sampled_from(["acme", "globex"]), hold=st.booleans())
    def send_twice_at_once(self, tenant, hold):
        """The same new message sent twice at once to each hub: one task, which both
        answers name (or the text's InvalidRequestError while it is starting)."""
        running = [t for t in self.tasks.values() if t.tenant == tenant and t.ended is None]
        if len(running) >= CONCURRENCY:
            return                              # refused twice: two REJECTED tasks
        self.sent += 1
        gate_name = f"g-{self.prefix}-{self.sent}" if hold else None
        message = {"messageId": f"m-{self.prefix}-{self.sent}", "role": "ROLE_USER",
                   "parts": [{"text": f"hold {gate_name}" if hold else "at once"}]}
        params = {"message": message, "configuration": {"returnImmediately": True}}
        answers = {side: self.pair.race(side, tenant, "mixed", "SendMessage", params, 2)
                   for side in SIDES}
        got = {}
        for side in SIDES:
            ids = {answer["result"]["task"]["id"] for answer in answers[side]
                   if "result" in answer}
            refused = [answer for answer in answers[side] if "error" in answer]
            assert len(ids) == 1, answers[side]
            assert all(answer["error"]["code"] == -32600 for answer in refused), refused
            got[side] = ids.pop()
        name = self.pair.name("task", got)
        task = self.tasks[name] = Task(name, tenant, "mixed", None, message["messageId"],
                                       gate_name)
        if not hold:
            self._wait_final(task)
            self._ended(task)
        read = self.pair.same(tenant, "mixed", "GetTask", {"id": name})["memory"].json()
        task.context = self.pair.names["memory"].get(read["result"]["contextId"])

    @rule(tenant=st.sampled_from(["acme", "globex"]), data=st.data())
    def send_to_a_task(self, tenant, data):
        """A message with a ``taskId`` (any task's, finished or not, or none known):
        continuing a task is not supported."""
        name = self._pick(data) or UNKNOWN
        self.sent += 1
        message = {"messageId": f"m-{self.prefix}-{self.sent}", "role": "ROLE_USER",
                   "taskId": name, "parts": [{"text": "again"}]}
        answers = self.pair.same(tenant, "mixed", "SendMessage", {"message": message})
        assert answers["memory"].json()["error"]["code"] == -32004

    @precondition(lambda self: any(t.gate and t.ended is None for t in self.tasks.values()))
    @rule(data=st.data())
    def release(self, data):
        name = self._pick(data, running=True)
        task = self.tasks[name]
        gate(task.gate).set()
        self._wait_final(task)
        self._ended(task)

    # --- reads ---------------------------------------------------------------------------

    @rule(tenant=st.sampled_from(["acme", "globex"]), data=st.data())
    def cancel(self, tenant, data):
        name = self._pick(data) or UNKNOWN
        task = self.tasks.get(name)
        agent_name = task.agent if task is not None else "mixed"
        payload = self.pair.same(tenant, agent_name, "CancelTask", {"id": name})["memory"]
        payload = payload.json()
        mine = task is not None and task.tenant == tenant
        if not mine or task.forgotten:
            assert payload["error"]["code"] == -32001, payload
        elif task.ended is not None:
            assert payload["error"]["code"] in (-32001, -32002), payload
            if payload["error"]["code"] == -32001:
                task.forgotten = True
        else:
            assert payload["result"]["status"]["state"] == "TASK_STATE_CANCELED", payload
            self._ended(task)

    # --- push configs --------------------------------------------------------------------

    @rule(data=st.data(), tenant=st.sampled_from(["acme", "globex"]),
          config_id=st.sampled_from([None, "c1", "c2"] + [f"c{i}" for i in range(3, 12)]),
          token=st.sampled_from([None, "tk"]))
    def create_config(self, data, tenant, config_id, token):
        name = self._pick(data, finished=True, tenant=PUSHED) or UNKNOWN
        task = self.tasks.get(name)
        params = {"taskId": name, "url": HOOK}
        if config_id is not None:
            params["id"] = config_id
        if token is not None:
            params["token"] = token
        agent_name = task.agent if task is not None else "mixed"
        answers = self.pair.same(tenant, agent_name, "CreateTaskPushNotificationConfig",
                                 params)
        result = {side: answers[side].json().get("result") for side in SIDES}
        if result["memory"] is not None and config_id is None:
            self.pair.name("cfg", {side: result[side]["id"] for side in SIDES})

    # --- the model -----------------------------------------------------------------------

    @rule()
    def read_every_task(self):
        """GetTask of every task told: the forgotten stay forgotten; the kept finished of a
        tenant are at most its cap."""
        kept = {tenant: 0 for tenant in CAPS}
        for name, task in self.tasks.items():
            payload = self.pair.same(task.tenant, task.agent, "GetTask",
                                     {"id": name})["memory"].json()
            if "error" in payload:
                assert payload["error"]["code"] == -32001 and task.ended is not None, name
                task.forgotten = True
            else:
                assert not task.forgotten, name
                assert (payload["result"]["status"]["state"] in FINAL) == \
                    (task.ended is not None), (name, payload)
                kept[task.tenant] += task.ended is not None
        for tenant, cap in CAPS.items():
            assert kept[tenant] <= cap, (tenant, kept)
            ended = sorted((t for t in self.tasks.values()
                            if t.tenant == tenant and t.ended is not None),
                           key=lambda t: t.ended)
            flags = [t.forgotten for t in ended]     # the forgotten: the oldest by end
            assert flags == sorted(flags, reverse=True), (tenant, [t.name for t in ended],
                                                          flags)
            assert not ended or not ended[-1].forgotten


@pytest.fixture(scope="module")
def machine(module_redis):
    HubModel.redis = module_redis
    yield HubModel
    HubModel.redis = None


def test_both_stores_answer_alike_and_keep_to_the_model(machine):
    state = machine.TestCase
    state.settings = settings(max_examples=60, stateful_step_count=60, deadline=None,
                              database=None, derandomize=True,
                              suppress_health_check=[HealthCheck.too_slow])
    state().runTest()


def test_a_tenant_past_its_bytes_hands_the_same_turns_on_both_stores(module_redis):
    """The shrunk case the model found: messages in one context of a tenant whose finished
    tasks pass ``max_bytes_per_tenant``: both stores forget the same oldest, so the agent
    ``history`` is handed the same earlier turns (before, the memory store kept one more
    task, and its answer told one more turn than Redis's)."""
    module_redis.flush()
    pair = Pair({"memory": create_hub(config("memory")),
                 "redis": create_hub(config(module_redis.url))}, {"acme": {"X-API-Key": KEY_A}})
    try:
        answers = []
        for i, (agent_name, text, context) in enumerate([
                ("mixed", "hi 1", None), ("history", "anything", "ctx-0000000a"),
                ("mixed", "fail", "ctx-0000000a"), ("mixed", "hi 4", "ctx-0000000a"),
                ("history", "anything", "ctx-0000000a")]):
            message = {"messageId": f"m-0000000a-{i + 1}", "role": "ROLE_USER",
                       "parts": [{"text": text}]}
            if context is not None:
                message["contextId"] = context
            answers.append(pair.same("acme", agent_name, "SendMessage", {"message": message}))
        last = answers[-1]["redis"].json()["result"]["task"]["artifacts"][0]["parts"][0]
        assert last["text"] == "(none)", last        # the context's earlier tasks: forgotten
        listed = pair.same("acme", "mixed", "ListTasks", {})["memory"].json()["result"]
        assert listed["totalSize"] == 2, listed
    finally:
        for hub in pair.hubs.values():
            close_hub(hub)
