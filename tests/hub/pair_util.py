"""Two hubs of one configuration, one on the memory store and one on Redis, asked the same
calls: their answers compared byte for byte once the ids each generated are named alike
(tests/hub/test_hub_model.py).

An id a hub generates (a task's, a context's, a push config's) gets a name (``task-1``,
``ctx-1``, ``cfg-1``) the first time an answer carries it; a call names ids by these names,
and each hub is asked with its own id. An answer is compared with every id of the hub's
replaced by its name, each timestamp (checked to be RFC 3339 in milliseconds, UTC) by
``<ts>``, each progress message id's time by ``<ms>``, each non-empty ``nextPageToken`` by ``<token>`` and each push config's signing
key by ``<key>`` (derived from the task's id: each hub's own).
"""
from __future__ import annotations

import json
import re
import threading

from werkzeug.test import Client

from tests.hub.conftest import V1

SIDES = ("memory", "redis")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMESTAMP = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)"')
STAMP_FORM = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
TOKEN = re.compile(r'"nextPageToken":"[^"]+"')
KEY = re.compile(r'"credentials":"[A-Za-z0-9_-]+"')
PROGRESS = re.compile(r'-progress-\d+"')        # a progress message's id: its time (ms)


class Answer:
    """One hub's answer: its status, content type and body with its ids named."""

    def __init__(self, response, names: dict):
        self.status = response.status_code
        self.content_type = response.headers.get("Content-Type")
        self.raw = response.get_data(as_text=True)
        response.close()                    # a stream's end: its subscription slot given back
        self.text = normalised(self.raw, names)

    def json(self):
        return json.loads(self.raw)

    def key(self):
        return (self.status, self.content_type, self.text)


def normalised(text: str, names: dict) -> str:
    """``text`` with each of the hub's ids named, its timestamps, page tokens and signing
    keys as placeholders (a timestamp not in the wire's form is left: it differs)."""
    text = UUID.sub(lambda m: names.get(m.group(0), m.group(0)), text)
    text = TIMESTAMP.sub(lambda m: '"<ts>"' if STAMP_FORM.fullmatch(m.group(1))
                         else m.group(0), text)
    text = PROGRESS.sub('-progress-<ms>"', text)
    return KEY.sub('"credentials":"<key>"', TOKEN.sub('"nextPageToken":"<token>"', text))


class Pair:
    """The two hubs, each with a client per tenant credential and its ids by name."""

    def __init__(self, hubs: dict, credentials: dict):
        self.hubs = hubs
        self.clients = {side: Client(hub) for side, hub in hubs.items()}
        self.credentials = credentials           # tenant -> headers
        self.ids = {side: {} for side in SIDES}  # name -> the side's id
        self.names = {side: {} for side in SIDES}
        self.counts: dict = {}
        self.next_id = 0

    def name(self, kind: str, ids: dict) -> str:
        """The name of the ids ``{side: id}`` (one new name, ``kind``-n, if none has one)."""
        known = {self.names[side].get(ids[side]) for side in SIDES}
        assert len(known) == 1, (kind, ids, known)     # both named alike, or neither
        found = known.pop()
        if found is not None:
            return found
        self.counts[kind] = self.counts.get(kind, 0) + 1
        found = f"{kind}-{self.counts[kind]}"
        for side in SIDES:
            self.ids[side][found] = ids[side]
            self.names[side][ids[side]] = found
        return found

    def name_new(self, answers: dict) -> None:
        """Name the ids each answer carries first, in the order they come (the same count of
        new ones on each side: else the answers differ, as the comparison tells), and name
        its answer again."""
        new = {}
        for side in SIDES:
            seen = dict.fromkeys(UUID.findall(answers[side].raw))
            new[side] = [found for found in seen if found not in self.names[side]]
        shared = set(new["memory"]) & set(new["redis"])      # ids the caller chose
        new = {side: [found for found in new[side] if found not in shared] for side in SIDES}
        if len(new["memory"]) != len(new["redis"]):
            return
        for ids in zip(new["memory"], new["redis"]):
            self.name("id", dict(zip(SIDES, ids)))
        for side in SIDES:
            answers[side].text = normalised(answers[side].raw, self.names[side])

    def real(self, side: str, value):
        """``value`` (params) with each name of an id replaced by the side's id."""
        if isinstance(value, str):
            return self.ids[side].get(value, value)
        if isinstance(value, list):
            return [self.real(side, item) for item in value]
        if isinstance(value, dict):
            return {key: self.real(side, item) for key, item in value.items()}
        return value

    def call(self, tenant: str, agent: str, method: str, params=None) -> dict:
        """The same call to both hubs: ``{side: Answer}``."""
        self.next_id += 1
        answers = {}
        for side in SIDES:
            body = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
            if params is not None:
                body["params"] = self.real(side, params)
            response = self.clients[side].post(
                f"/a2a/v1/agents/{agent}", data=json.dumps(body),
                headers={**V1, **self.credentials[tenant]}, content_type="application/json")
            answers[side] = Answer(response, self.names[side])
        return answers

    def race(self, side: str, tenant: str, agent: str, method: str, params, count: int):
        """The same call made ``count`` times at once to one hub (each its own client and
        thread, started together): their answers' JSON."""
        body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": method,
                           "params": self.real(side, params)})
        start = threading.Barrier(count)
        answers = [None] * count

        def post(i):
            client = Client(self.racer(side, i))
            start.wait(timeout=10)
            answers[i] = client.post(f"/a2a/v1/agents/{agent}", data=body,
                                     headers={**V1, **self.credentials[tenant]},
                                     content_type="application/json").get_json()
        threads = [threading.Thread(target=post, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert all(answer is not None for answer in answers), answers
        return answers

    def racer(self, side: str, i: int):
        """The hub the ``i``-th call of a race goes to: the side's."""
        return self.hubs[side]

    def same(self, tenant: str, agent: str, method: str, params=None) -> dict:
        """``call``, asserting both answers are alike; the memory hub's as JSON (SSE: the
        raw answers)."""
        answers = self.call(tenant, agent, method, params)
        self.name_new(answers)
        memory, redis = answers["memory"], answers["redis"]
        assert memory.key() == redis.key(), (method, params, memory.raw, redis.raw)
        assert memory.status == 200, (method, memory.raw)
        return answers
