"""A hub on Werkzeug's test client: two tenants, keys, a JWT secret, hosted test agents."""
from __future__ import annotations

import hashlib
import json
import time
import uuid

import jwt
import pytest
from werkzeug.test import Client

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store import StoreError, memory_stores, redis_stores
from murmur_wsgi.hub.task import REJECTED, HubTask

KEY_A = "mhk_tenant-a-key"
KEY_A2 = "mhk_tenant-a-second"
KEY_B = "mhk_tenant-b-key"
SECRET = "a-test-secret-long-enough-for-hs512-" + "s" * 40
ISSUER = "https://issuer.example"
AUDIENCE = "murmur-hub"
PUBLIC = "https://hub.example.com"
V1 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="session", autouse=True)
def one_default_tls_context():
    """PERF: a hub with push makes its webhook TLS context with the system's trust
    (``egress.tls_context(None)``): the CA bundle's load, 46 ms of CPU, was most of a push
    hub's start, in a few hundred tests. The hubs here share one context so made (configured
    as each would be; nothing changes a context once made); a ``ca_file`` still gets its
    own."""
    from murmur_wsgi.hub.push import egress
    made = egress.tls_context
    shared: list = []

    def tls_context(ca_file):
        if ca_file:
            return made(ca_file)
        if not shared:
            shared.append(made(None))
        return shared[0]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(egress, "tls_context", tls_context)
        yield


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def agent(ref: str, **extra) -> dict:
    return {"agent": ref, "publish": True, "description": f"{ref} for tests",
            "version": "2.1.0", **extra}


def hub_config(**overrides) -> dict:
    config = {
        "public_url": PUBLIC,
        "auth": {"jwt": {"secret": SECRET, "issuer": ISSUER, "audience": AUDIENCE}},
        "limits": {"run_timeout_secs": 30},
        "cancel_timeout_secs": 5,
        "pricing": {"gpt-4o": {"input": 1_000_000, "output": 2_000_000, "cached": 1_000_000},
                    "big": {"input": 1000, "output": 2000}},
        "tenants": {
            "acme": {"api_keys": [sha(KEY_A), sha(KEY_A2)], "agents": {
                "echo": agent("demo", skills=[
                    {"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["t"]},
                    {"id": "broken", "name": "No description"}]),
                "tokens": agent("tests.hub.agents:tokens"),
                "held": agent("tests.hub.agents:held"),
                "stubborn": agent("tests.hub.agents:stubborn"),
                "publishes": agent("tests.hub.agents:publishes_then_holds"),
                "fails": agent("tests.hub.agents:fails"),
                "crashes": agent("tests.hub.agents:crashes"),
                "models": agent("tests.hub.agents:models"),
                "history": agent("tests.hub.agents:history"),
                "data": agent("tests.hub.agents:with_data"),
                "partial": agent("tests.hub.agents:partial"),
                "streams_on": agent("tests.hub.agents:streams_on"),
                "many": agent("tests.hub.agents:many"),
                "named": agent("tests.hub.agents:named"),
                "rejects": agent("tests.hub.agents:rejects"),
                "open": agent("tests.hub.agents:leaves_open"),
                "mixed": agent("tests.hub.agents:mixed"),
                "charged": agent("tests.hub.agents:charged"),
                "hidden": {"agent": "demo", "publish": False},
            }},
            "globex": {"api_keys": [sha(KEY_B)], "admission": "tests.hub.agents:refuse_beta",
                       "limits": {"concurrency": 1, "rate_per_minute": 3,
                                  "max_subscriptions": 1},
                       "agents": {"echo": agent("demo"),
                                  "held": agent("tests.hub.agents:held"),
                                  "stubborn": agent("tests.hub.agents:stubborn")}},
        },
    }
    for key, value in overrides.items():
        config[key] = value
    return config


def token(tenants=("acme",), *, exp_in=86_400, **claims) -> str:
    # A day: tokens made when the suite is collected are used as late as its end.
    body = {"sub": "someone", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + exp_in,
            "tenants": list(tenants), **claims}
    return jwt.encode(body, SECRET, algorithm="HS256")


class HubClient:
    """JSON-RPC to one hub agent with one credential."""

    def __init__(self, hub, agent: str = "echo", headers: dict | None = None):
        self.hub = hub
        self.client = Client(hub)
        self.agent = agent
        self.headers = {"X-API-Key": KEY_A} if headers is None else headers
        self.next_id = 0

    @property
    def path(self) -> str:
        return f"/a2a/v1/agents/{self.agent}"

    def post(self, body, headers=None, agent=None, **kwargs):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        hdrs = {**V1, **self.headers, **(headers or {})}
        hdrs = {k: v for k, v in hdrs.items() if v is not None}
        path = f"/a2a/v1/agents/{agent}" if agent else self.path
        return self.client.post(path, data=data, headers=hdrs, content_type="application/json",
                                **kwargs)

    def call(self, method, params=None, headers=None, agent=None, **kwargs):
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            body["params"] = params
        return self.post(body, headers, agent, **kwargs)

    def result(self, method, params=None, **kwargs):
        payload = self.call(method, params, **kwargs).get_json()
        assert "result" in payload, payload
        return payload["result"]

    def error(self, method, params=None, **kwargs):
        response = self.call(method, params, **kwargs)
        assert response.status_code == 200
        payload = response.get_json()
        assert "error" in payload, payload
        return payload["error"]

    def card(self, headers=None, agent=None):
        hdrs = {**self.headers, **(headers or {})}
        hdrs = {k: v for k, v in hdrs.items() if v is not None}
        return self.client.get(f"/a2a/v1/agents/{agent or self.agent}"
                               "/.well-known/agent-card.json", headers=hdrs)

    def send(self, text, *, message_id=None, context_id=None, configuration=None, parts=None,
             **kwargs):
        result = self.result("SendMessage", send_params(text, message_id=message_id,
                                                        context_id=context_id,
                                                        configuration=configuration,
                                                        parts=parts), **kwargs)
        assert list(result) == ["task"], result          # SendMessageResponse: {"task": …}
        return result["task"]


_counter = [0]


def send_params(text, *, message_id=None, context_id=None, configuration=None, parts=None):
    _counter[0] += 1
    msg = {"messageId": message_id or f"m-{time.monotonic_ns()}-{_counter[0]}",
           "role": "ROLE_USER", "parts": parts if parts is not None else [{"text": text}]}
    if context_id is not None:
        msg["contextId"] = context_id
    params = {"message": msg}
    if configuration is not None:
        params["configuration"] = configuration
    return params


def streaming(rpc, text: str) -> dict:
    """A background task of ``rpc``'s agent whose run has streamed a token: its reply."""
    task = rpc.send(text, configuration={"returnImmediately": True})
    wait_until(lambda: rpc.hub.runs.get(task["id"]) is not None
               and rpc.hub.runs.get(task["id"]).tokens)
    return task


def whole_log(store, task_id: str, after: int = 0) -> list[str]:
    """Every payload of a finished task's log after position ``after``, read as a stream
    reads it: a read may bring a part (a Redis store's a page, the memory store's up to an
    event it makes for the read)."""
    logged, last = [], store.last_position(task_id)
    while after < last:
        events, _ = store.events(task_id, after, 1.0)
        assert events, after
        logged.extend(event.payload for event in events)
        after = events[-1].seq
    return logged


def sse_events(response) -> list[dict]:
    """Every data: line's JSON of a (finished) SSE response."""
    text = response.get_data(as_text=True)
    return [json.loads(line[len("data: "):]) for line in text.split("\n")
            if line.startswith("data: ")]


def refused_task(hub, size: int, tenant: str = "acme") -> str:
    """A REJECTED task of ``tenant``'s echo stored as is (no run), its message ``size`` bytes
    of text: its id."""
    message = {"messageId": f"m-{uuid.uuid4().hex}", "role": "ROLE_USER",
               "parts": [{"text": "x" * size}]}
    task = HubTask(str(uuid.uuid4()), "ctx", tenant, "echo", message["messageId"], message)
    task.set_state(REJECTED, None)
    hub.store.create(task, task.task_event(), bind=False)
    return task.id


def not_cancelable(task_id: str, state: str, why: str | None = None) -> dict:
    """CancelTask's -32002 error object: the task ``state`` ended in, or ``why`` it was not
    cut (``state`` then the task's state as it stands)."""
    reason = why or f"it is already {state}"
    return {"code": -32002, "message": f"Task cannot be canceled: {reason}",
            "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                      "reason": "TASK_NOT_CANCELABLE", "domain": "a2a-protocol.org",
                      "metadata": {"taskId": task_id, "state": state}}]}


def replica_turn(hub) -> bool:
    """What a turn of ``hub``'s replica does with the runs that ended: writes the ends the
    store refused, looks at the runs, then beats (which takes them out of the runs, or
    finds them unended); whether the store took all three (a new primary may still be
    settling in)."""
    try:
        hub.runs.retry_unwritten()
        hub.store.settle_runs()
        hub.replica.store.heartbeat()
    except StoreError:
        return False
    return True


def wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.005)  # wait-ok: polling a condition with a deadline


STORES = ("memory", "redis")
CLUSTER = "cluster"          # a real 3-primary Redis Cluster (tests/redis_topologies.py)


def pytest_configure(config):
    config.addinivalue_line("markers", "one_store: the test (or module: pytestmark) runs on "
                                       "the memory store only; every other test that uses "
                                       "the fixture store, stores or hub runs on both")
    config.addinivalue_line("markers", "cluster: the test (or module: pytestmark) runs on a "
                                       "Redis Cluster too: its store, stores or hub as a "
                                       "third store, its redis_server (pair) as a second")


def pytest_generate_tests(metafunc):
    """Every test of the fixture ``store`` (``hub``, ``rpc``) or ``stores`` runs on the memory
    store and on a real redis-server, unless marked ``one_store``; marked ``cluster``, on a
    Redis Cluster as well, and so does a test of ``redis_server`` (``pair``)."""
    if metafunc.definition.get_closest_marker("one_store") is not None:
        return
    cluster = metafunc.definition.get_closest_marker("cluster") is not None
    for name in ("stores", "store"):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, STORES + ((CLUSTER,) if cluster else ()), indirect=True)
            return
    if cluster and "redis_server" in metafunc.fixturenames:
        # NOTE: the param goes to ``redis_kind``, not to ``redis_server``: a param of that
        # name would reach the session's fixture too, and restart its redis-server each test.
        metafunc.parametrize("redis_kind", ("redis", CLUSTER), indirect=True)


@pytest.fixture
def redis_kind(request):
    """Which Redis the fixture ``redis_server`` is: "redis" or (marked ``cluster``) "cluster"."""
    return getattr(request, "param", "redis")


@pytest.fixture
def redis_server(redis_server, redis_kind, request):
    """The session's redis-server, or (``redis_kind`` ``cluster``) its Redis Cluster
    (tests/conftest.py's ``redis_cluster``): both have ``url``, ``client()`` and ``flush()``."""
    if redis_kind == CLUSTER:
        return request.getfixturevalue("redis_cluster")
    return redis_server


def _redis_of(request):
    """The flushed Redis (a server or the cluster) a ``store``/``stores`` param names."""
    server = request.getfixturevalue("redis_cluster" if request.param == CLUSTER
                                     else "redis_server")
    server.flush()
    return server


@pytest.fixture
def store(request):
    """The ``store`` setting of the fixture ``hub``: "memory", or a flushed redis-server's
    (or Redis Cluster's) URL."""
    if getattr(request, "param", "memory") == "memory":
        return "memory"
    return _redis_of(request).url


class Clock:
    """A test clock for the memory store (Redis keeps its own time)."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def retention():
    """The finished tasks' retention of the fixture ``stores`` (None: the defaults); a module
    overrides it with a ``store.retention.Retention``."""
    return None


@pytest.fixture
def stores(request, clock, retention):
    """The store's four parts (``hub.store.Stores``): in memory on ``clock``, or on a flushed
    redis-server (replica id ``me``)."""
    if getattr(request, "param", "memory") == "memory":
        found = memory_stores(clock=clock, retention=retention)
    else:
        found = redis_stores(_redis_of(request).url, timeout_secs=2.0, replica_id="me",
                             retention=retention)
    yield found
    found.close()


def close_hub(h) -> None:
    """Open every gate an agent of ``tests/hub/agents.py`` waits on, and any it comes to while
    the hub closes, then close the hub; the gates are new ones for the next test."""
    from tests.hub.agents import GATES, OPENING
    OPENING.set()
    try:
        for event in list(GATES.values()):
            event.set()
        h.close(drain_timeout=5)
    finally:
        GATES.clear()
        OPENING.clear()


@pytest.fixture(scope="module")
def module_redis(tmp_path_factory):
    """A redis-server of the module's own, for hubs that live across its tests (property
    tests: what one example stores, the next ones read)."""
    from tests.redis_util import RedisServer
    server = RedisServer(tmp_path_factory.mktemp("module-redis")).start()
    yield server
    server.stop()


def module_store(request) -> str:
    """The ``store`` setting of a module-scoped fixture's param: "memory", or the URL of
    ``module_redis`` ("redis")."""
    if request.param == "memory":
        return "memory"
    return request.getfixturevalue("module_redis").url


@pytest.fixture
def hub(store):
    h = create_hub(hub_config(store=store))
    yield h
    close_hub(h)


@pytest.fixture
def rpc(hub):
    return HubClient(hub)


# Two replicas of one hub on one Redis (tests/hub/test_replicas.py, test_redis_limits.py):
# liveness and sweep fast enough that a vanished replica is swept in well under a second.
FAST = {"liveness_secs": 0.3, "sweep_interval_secs": 0.1, "timeout_secs": 0.5}


def redis_hub(redis_server, agents: dict | None = None, redis: dict | None = None,
              limits: dict | None = None, **overrides):
    """A hub on the (flushed) Redis of ``redis_server``, FAST's settings (``redis`` over
    them), acme hosting ``agents`` too (``{name: "module:function"}``) and with ``limits``
    as its own."""
    redis_server.flush()
    config = hub_config(store=redis_server.url, redis=dict(FAST, **(redis or {})), **overrides)
    for name, ref in (agents or {}).items():
        config["tenants"]["acme"]["agents"][name] = agent(ref)
    if limits is not None:
        config["tenants"]["acme"]["limits"] = limits
    return create_hub(config)


@pytest.fixture
def pair(redis_server):
    """Two hubs (each its own runs and replica id) on one flushed Redis, as HubClients.

    FAST's sweep and timeout, a liveness of 1 s: a replica here vanishes when a test
    removes its key. With FAST's 0.3 s (renewed every 0.1 s), a renewal 0.2 s late on a
    loaded machine had the other's sweep end a live replica's run FAILED, in a test about
    something else (a CancelTask's answer)."""
    redis_server.flush()
    hubs = [create_hub(hub_config(store=redis_server.url, redis=dict(FAST, liveness_secs=1.0)))
            for _ in range(2)]
    yield [HubClient(h) for h in hubs]
    for h in hubs:
        close_hub(h)
