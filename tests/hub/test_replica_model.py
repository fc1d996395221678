"""Two hub replicas on one Redis answer each call as the memory hub does, whichever replica
a call goes to (docs/hub.md, "Replicas on Redis": any replica answers any request).

The model of tests/hub/test_hub_model.py, with its Redis side made of two replicas (two hub
objects, each its own runs and replica id, on one flushed Redis, the sweep and timeout of
tests/hub/conftest.py's ``FAST``): each call goes to the replica the strategy's route names
next (a message sent on A, then read, listed, canceled, subscribed to or given a push
config on B, or on A again), and the same new message sent twice at once goes to A and to
B together, as do two cancels of one run at once. A held run (one that streamed, reported
usage and progress first, too) is subscribed to on either replica and then released or
canceled on either: the same stream, to its final event. The memory hub gets every call,
every answer of the replicas is byte for byte the memory hub's (ids named, timestamps
placed), and the model holds as there. A run is waited for on whichever replica runs it; a
cancel of a run on the other replica answers once the task's final event is written
(docs/hub.md: it waits for it), so its answer is compared as any other. On a single Redis
and on a 3-primary Redis Cluster.
"""
from __future__ import annotations

import json
import threading
import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from werkzeug.test import Client

from murmur_wsgi.agents.base import TaskCanceled
from murmur_wsgi.hub import create_hub
from tests.hub import test_hub_model
from tests.hub.agents import gate
from tests.hub.conftest import FAST, KEY_A, KEY_B, V1, agent, close_hub, wait_until
from tests.hub.model_reads import FINAL
from tests.hub.pair_util import SIDES, Pair, normalised

pytestmark = pytest.mark.one_store          # the module's own hubs: memory and two replicas

REPLICAS = ("A", "B")
SPENT: dict = {}                            # gate name -> runs that have spent and hold
SPENDING = threading.Lock()


def spends(ctx):
    """Stream ``spent``, report usage and a progress status, then hold until the gate the
    text names opens (or the run is canceled)."""
    ctx.write("spent")
    ctx.usage(input_tokens=1500, output_tokens=500, model="gpt-4o")
    ctx.progress("holding")
    with SPENDING:
        SPENT[ctx.text] = SPENT.get(ctx.text, 0) + 1
    event = gate(ctx.text)
    while not event.is_set():
        if ctx.wait(0.02):
            raise TaskCanceled(ctx.task_id)
    return "spent"


def config(store: str) -> dict:
    config = test_hub_model.config(store)
    for tenant in config["tenants"].values():
        tenant["agents"] = dict(tenant["agents"], spends=agent(f"{__name__}:spends"))
    if store != "memory":
        # NOTE: FAST's sweep and timeout, a liveness of 2 s: no replica dies here, and a
        # replica whose beat a loaded machine delays past 0.3 s is taken for dead (docs/hub.md:
        # a replica that stalls past its liveness), its held runs ended FAILED on Redis only.
        config["redis"] = dict(FAST, liveness_secs=2.0)
    return config


class Routed(Pair):
    """A ``Pair`` whose Redis side is two replicas: each call goes to the next replica of
    ``route`` (cycled), a race of two to A and to B at once."""

    def __init__(self, memory, replicas: dict, credentials: dict):
        super().__init__({"memory": memory, "redis": replicas["A"]}, credentials)
        self.replicas = replicas
        self.replica_clients = {name: Client(hub) for name, hub in replicas.items()}
        self.route = list(REPLICAS)
        self.step = 0

    def call(self, tenant, agent, method, params=None):
        self.clients["redis"] = self.replica_clients[self.next_replica()]
        return super().call(tenant, agent, method, params)

    def next_replica(self) -> str:
        replica = self.route[self.step % len(self.route)]
        self.step += 1
        return replica

    def streams(self, tenant, agent, method, params) -> dict:
        """The same streaming call to both sides, each begun (its first chunk read):
        ``{side: (response, its chunks' iterator, [that chunk])}``."""
        self.next_id += 1
        begun = {}
        for side in SIDES:
            client = self.clients[side] if side == "memory" else \
                self.replica_clients[self.next_replica()]
            body = {"jsonrpc": "2.0", "id": self.next_id, "method": method,
                    "params": self.real(side, params)}
            response = client.post(f"/a2a/v1/agents/{agent}", data=json.dumps(body),
                                   headers={**V1, **self.credentials[tenant]},
                                   content_type="application/json", buffered=False)
            chunks = iter(response.response)
            begun[side] = (response, chunks, [next(chunks)])
        return begun

    def racer(self, side, i):
        return self.replicas[REPLICAS[i % 2]] if side == "redis" else self.hubs[side]


class ReplicaModel(test_hub_model.HubModel):
    redis = None                            # the module's Redis (set by the test)

    def __init__(self):
        super(test_hub_model.HubModel, self).__init__()
        self.redis.flush()
        replicas = {name: create_hub(config(self.redis.url)) for name in REPLICAS}
        self.pair = Routed(create_hub(config("memory")), replicas,
                           {"acme": {"X-API-Key": KEY_A}, "globex": {"X-API-Key": KEY_B}})
        self.tasks = {}
        self.ends = 0
        self.prefix = uuid.uuid4().hex[:8]
        self.sent = 0
        self.configs = {}

    def teardown(self):
        try:
            super().teardown()
        finally:
            close_hub(self.pair.replicas["B"])

    @rule(route=st.lists(st.sampled_from(REPLICAS), min_size=1, max_size=6))
    def reroute(self, route):
        """The replicas the next calls go to, in turn."""
        self.pair.route = route
        self.pair.step = 0

    @rule(tenant=st.sampled_from(["acme", "globex"]))
    def send_spending(self, tenant):
        """A run that streams, reports usage and progress and then holds (sent to a replica
        of the route), once both runs hold."""
        running = [t for t in self.tasks.values() if t.tenant == tenant and t.ended is None]
        if len(running) >= test_hub_model.CONCURRENCY:
            return
        self.sent += 1
        gate_name = f"g-{self.prefix}-{self.sent}"
        message = {"messageId": f"m-{self.prefix}-{self.sent}", "role": "ROLE_USER",
                   "parts": [{"text": gate_name}]}
        answers = self.pair.same(tenant, "spends", "SendMessage",
                                 {"message": message,
                                  "configuration": {"returnImmediately": True}})
        got = {side: answers[side].json()["result"]["task"] for side in SIDES}
        name = self.pair.name("task", {side: got[side]["id"] for side in SIDES})
        context = self.pair.name("ctx", {side: got[side]["contextId"] for side in SIDES})
        self.tasks[name] = test_hub_model.Task(name, tenant, "spends", context,
                                               message["messageId"], gate_name)
        wait_until(lambda: SPENT.get(gate_name, 0) == 2)

    @precondition(lambda self: any(t.gate and t.ended is None for t in self.tasks.values()))
    @rule(data=st.data(), cancel=st.booleans(), repeat=st.booleans())
    def subscribe_running(self, data, cancel, repeat):
        """SubscribeToTask of a held run (on either replica), or its message sent again as a
        SendStreamingMessage (which subscribes to it), then the run released or canceled (on
        either): the same stream on every side, to its final event."""
        name = self._pick(data, running=True)
        task = self.tasks[name]
        if repeat:
            begun = self.pair.streams(task.tenant, task.agent, "SendStreamingMessage",
                                      {"message": self._again(task)})
        else:
            begun = self.pair.streams(task.tenant, task.agent, "SubscribeToTask",
                                      {"id": name})
        if cancel:
            answer = self.pair.same(task.tenant, task.agent, "CancelTask", {"id": name})
            assert answer["memory"].json()["result"]["status"]["state"] == \
                "TASK_STATE_CANCELED", answer["memory"].raw
        else:
            gate(task.gate).set()
        self._wait_final(task)
        self._ended(task)
        texts = {}
        for side, (response, chunks, first) in begun.items():
            raw = b"".join(first + list(chunks)).decode()
            response.close()
            texts[side] = normalised(raw, self.pair.names[side])
        assert texts["memory"] == texts["redis"], texts
        last = json.loads(texts["memory"].strip().split("\n")[-1][len("data: "):])["result"]
        assert last["statusUpdate"]["status"]["state"] in FINAL, texts

    @rule(tenant=st.sampled_from(["acme", "globex"]))
    def send_blocking_twice_at_once(self, tenant):
        """A new blocking message sent twice at once (on the Redis side: to A and to B): one
        task; the sender's answer its end (COMPLETED), the other's the task as it stands
        (WORKING, or its end) or, while it is starting, the text's InvalidRequestError."""
        running = [t for t in self.tasks.values() if t.tenant == tenant and t.ended is None]
        if len(running) >= test_hub_model.CONCURRENCY:
            return
        self.sent += 1
        message = {"messageId": f"m-{self.prefix}-{self.sent}", "role": "ROLE_USER",
                   "parts": [{"text": f"at once {self.sent}"}]}
        got = {}
        for side in SIDES:
            answers = self.pair.race(side, tenant, "mixed", "SendMessage", {"message": message},
                                     2)
            tasks = [answer["result"]["task"] for answer in answers if "result" in answer]
            assert len({task["id"] for task in tasks}) == 1, answers
            assert all(answer["error"]["code"] == -32600 for answer in answers
                       if "error" in answer), answers
            states = sorted(task["status"]["state"] for task in tasks)
            assert "TASK_STATE_COMPLETED" in states, answers
            assert set(states) <= {"TASK_STATE_COMPLETED", "TASK_STATE_WORKING"}, answers
            got[side] = tasks[0]["id"]
        name = self.pair.name("task", got)
        task = self.tasks[name] = test_hub_model.Task(name, tenant, "mixed", None,
                                                      message["messageId"])
        self._wait_final(task)
        self._ended(task)
        read = self.pair.same(tenant, "mixed", "GetTask", {"id": name})["memory"].json()
        task.context = self.pair.names["memory"].get(read["result"]["contextId"])

    @rule(tenant=st.sampled_from(["acme", "globex"]), page_size=st.integers(1, 4),
          status=st.sampled_from([None, "TASK_STATE_WORKING", "TASK_STATE_CANCELED"]),
          artifacts=st.sampled_from([None, True, False]),
          history=st.sampled_from([None, 0, 2]), data=st.data())
    def list_spending(self, tenant, page_size, status, artifacts, history, data):
        """ListTasks of the agent whose runs streamed, reported usage and progress: running
        ones (their artifacts and status message so far) and ended ones, on either
        replica."""
        self.list_tasks(tenant=tenant, path="spends", context=None, status=status,
                        after=None, page_size=page_size, artifacts=artifacts,
                        history=history, data=data)

    @staticmethod
    def _again(task) -> dict:
        """The message of a held run, sent again (its ``messageId``, its text)."""
        text = task.gate if task.agent == "spends" else f"hold {task.gate}"
        return {"messageId": task.message_id, "role": "ROLE_USER", "parts": [{"text": text}]}

    @precondition(lambda self: any(t.gate and t.ended is None for t in self.tasks.values()))
    @rule(data=st.data(), history=st.sampled_from([None, 0, 1]))
    def send_running_again(self, data, history):
        """A held run's message sent again (a blocking SendMessage, on either replica): the
        task as it stands, WORKING."""
        task = self.tasks[self._pick(data, running=True)]
        params = {"message": self._again(task)}
        if history is not None:
            params["configuration"] = {"historyLength": history}
        answer = self.pair.same(task.tenant, task.agent, "SendMessage", params)["memory"]
        assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING", \
            answer.raw

    @precondition(lambda self: any(t.gate and t.ended is None for t in self.tasks.values()))
    @rule(data=st.data())
    def cancel_twice_at_once(self, data):
        """The same running task canceled twice at once (on the Redis side: on A and on B):
        on every side the same CANCELED task, and a cancel that finds the task ended
        already (the other's done: a matter of timing, on the memory hub too) -32002."""
        name = self._pick(data, running=True)
        task = self.tasks[name]
        answers = {side: self.pair.race(side, task.tenant, task.agent, "CancelTask",
                                        {"id": name}, 2) for side in SIDES}
        canceled = {}
        for side in SIDES:
            texts = {normalised(json.dumps(answer), self.pair.names[side])
                     for answer in answers[side] if "result" in answer}
            assert len(texts) == 1, answers[side]
            canceled[side] = texts.pop()
            for answer in answers[side]:
                assert "result" in answer or answer["error"]["data"][0]["metadata"][
                    "state"] == "TASK_STATE_CANCELED", answers[side]
        assert canceled["memory"] == canceled["redis"], canceled
        self._wait_final(task)
        self._ended(task)

    def _wait_final(self, task) -> None:
        """Wait until the memory hub and both replicas have ended the task's run (on the
        replica that runs it), its end written."""
        memory = self.pair.hubs["memory"]
        ids = {side: self.pair.ids[side][task.name] for side in ("memory", "redis")}
        hubs = [("memory", memory)] + [("redis", hub) for hub in self.pair.replicas.values()]

        def ended():
            for side, hub in hubs:
                run = hub.runs.get(ids[side])
                if run is not None and not run.ended:
                    return False
            for side, hub in (("memory", memory), ("redis", self.pair.hubs["redis"])):
                stored = hub.store.get(task.tenant, task.agent, ids[side])
                if stored is not None and not stored.terminal:
                    return False
            return True
        wait_until(ended)


def _run(server, examples: int) -> None:
    ReplicaModel.redis = server
    try:
        state = ReplicaModel.TestCase
        state.settings = settings(max_examples=examples, stateful_step_count=50,
                                  deadline=None, database=None, derandomize=True,
                                  suppress_health_check=[HealthCheck.too_slow])
        state().runTest()
    finally:
        ReplicaModel.redis = None


def test_two_replicas_answer_as_the_memory_hub(module_redis):
    _run(module_redis, 40)


def test_two_replicas_on_a_cluster_answer_as_the_memory_hub(redis_cluster):
    _run(redis_cluster, 10)

