"""Shared fixtures: a door on Werkzeug's test client, and a JSON-RPC request builder."""
from __future__ import annotations

import gc
import json
import threading

import pytest
from hypothesis import HealthCheck, settings
from werkzeug.test import Client

from murmur_wsgi import create_app

# The property tests' examples are drawn on a machine the suite shares (its pytest workers,
# the servers it starts): a slow draw or a slow example is that machine, not a defect.
settings.register_profile("suite", suppress_health_check=[HealthCheck.too_slow],
                          deadline=None)
settings.load_profile("suite")


def pytest_collection_finish(session):
    """PERF: what collection made (every test module, every item: a quarter of a million
    objects that live as long as the process) is collected once, then frozen (``gc.freeze``):
    no later collection walks it. Each full collection of a worker walked it: about 0.2 s,
    one every second or two (and pytest's own at the end). What the tests make is
    collected as before."""
    gc.collect()
    gc.freeze()


def pytest_ignore_collect(collection_path, config):
    """``-m "timed …"`` (`make test`'s timed runs): a test module that never names the
    marker has no test to select, so it is not imported (collecting the whole suite to
    select its timed tests took about a tenth of that run)."""
    if (config.getoption("markexpr").startswith("timed") and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_")
            and b"timed" not in collection_path.read_bytes()):
        return True
    return None


# The modules whose tests take longest (the end-to-end runs of gunicorn, the hub's stateful
# models: up to 30 s each), collected first: `make test`'s parallel run hands the tests out
# in their collection order, and those handed out last kept one process busy for half a
# minute after the others had finished.
LONG_FIRST = ("tests/e2e/", "tests/hub/test_replica_model.py", "tests/hub/test_hub_model.py")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The ``LONG_FIRST`` modules' tests first, each module's in its order (a stable sort:
    the same order in every process, as pytest-xdist requires)."""
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))


MY_AGENT = {
    "name": "my-agent", "version": "0.1.0", "tools": ["bash"],
    "capabilities": {"shell": {"allow": ["bash"]}, "network": {"allow": ["example.com"]}},
    "exports": {"files": {"root": "out/", "mode": "read-only"}},
}
V1 = {"A2A-Version": "1.0"}


def make_door(**overrides):
    manifest = {"name": "test-agent", "version": "0.1.0"}
    manifest.update(overrides)
    return create_app(manifest, listen="127.0.0.1:41873")


class Rpc:
    """A test client that speaks JSON-RPC to one door."""

    def __init__(self, door):
        self.door = door
        self.client = Client(door)
        self.next_id = 0

    def post(self, body, headers=None, content_type="application/json", path="/"):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        hdrs = dict(V1)
        hdrs.update(headers or {})
        hdrs = {k: v for k, v in hdrs.items() if v is not None}
        return self.client.post(path, data=data, headers=hdrs, content_type=content_type)

    def call(self, method, params=None, headers=None, request_id=None):
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id if request_id is None else request_id,
                "method": method}
        if params is not None:
            body["params"] = params
        return self.post(body, headers)

    def result(self, method, params=None, headers=None):
        response = self.call(method, params, headers)
        payload = response.get_json()
        assert "result" in payload, payload
        return payload["result"]

    def error(self, method, params=None, headers=None):
        response = self.call(method, params, headers)
        assert response.status_code == 200
        payload = response.get_json()
        assert "error" in payload, payload
        return payload["error"]


@pytest.fixture
def door():
    return make_door()


@pytest.fixture
def rpc(door):
    return Rpc(door)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One real redis-server for the session (tests/redis_util.py); flush it per test."""
    from tests.redis_util import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


class Starting:
    """A server's ``start()`` run on a thread; ``get()`` waits for it, raises what it raised,
    and returns the server."""

    def __init__(self, server):
        self.server, self.raised = server, []
        self.taken = False               # handed to a test (once)
        self.thread = threading.Thread(target=self._start, name="redis-start", daemon=True)
        self.thread.start()

    def _start(self) -> None:
        try:
            self.server.start()
        except BaseException as ex:  # noqa: BLE001 - raised by get(), on the test's thread
            self.raised.append(ex)

    def get(self):
        self.thread.join()
        if self.raised:
            raise self.raised[0]
        return self.server


def _uses_the_cluster(item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "redis_cluster" in item.fixturenames or "cluster" in params.values()


# A cluster a test may break, of each kind: the fixture that hands it out, its replicas, and
# its primaries.
SPARES = {"spare": ("spare_cluster", 0, 3), "replicated": ("replicated_cluster", 1, 3),
          "single": ("single_cluster", 0, 1)}


def _new_cluster(directory, name: str):
    """A Cluster (not started) of the kind ``name``: "shared" or one of ``SPARES``."""
    from tests.redis_topologies import Cluster

    _, replicas, size = SPARES.get(name, (None, 0, 3))
    return Cluster(directory, size=size, replicas=replicas)


class ClustersStarting:
    """Redis Clusters started on threads ahead of their tests: the session's ("shared") as
    the session begins, and of each kind of ``SPARES`` the first as the session begins,
    then, as a test takes one, those of the next ``AHEAD`` users, while that test runs
    (each test breaks its own). A cluster's start mostly waits (redis-cli's join, then the
    nodes' 2 s before they serve, about 3 s in all): the tests before its user run
    meanwhile, and one test (often under a second) is not enough of them."""

    AHEAD = 2

    def __init__(self, items, tmp_path_factory):
        self._mktemp = tmp_path_factory.mktemp
        self._left = {"shared": int(any(_uses_the_cluster(item) for item in items))}
        for name, (fixture, _, _) in SPARES.items():
            self._left[name] = sum(fixture in item.fixturenames for item in items)
        self.made: list[Starting] = []
        self._next: dict[str, list[Starting]] = {name: [] for name in self._left}
        for name in self._left:
            self._start(name)

    def _start(self, name: str) -> None:
        if self._left[name] > 0:
            self._left[name] -= 1
            started = Starting(_new_cluster(self._mktemp(f"cluster-{name}"), name))
            self.made.append(started)
            self._next[name].append(started)

    def take(self, name: str):
        """The started cluster of ``name`` (waited for), or None when none was started."""
        ahead = self._next.get(name)
        if not ahead:
            return None
        started = ahead.pop(0)
        while len(ahead) < self.AHEAD and self._left[name] > 0:
            self._start(name)             # the next users', while this one runs
        return started.get()


@pytest.fixture(scope="session", autouse=True)
def clusters_starting(request, tmp_path_factory):
    """The session's ``ClustersStarting``, for the tests to run; at its end every cluster it
    started is stopped."""
    starting = ClustersStarting(request.session.items, tmp_path_factory)
    yield starting
    for started in starting.made:
        started.thread.join()
        started.server.stop()


def _cluster(clusters_starting, name: str, tmp_path_factory):
    cluster = clusters_starting.take(name)
    if cluster is None:               # asked for by name only (getfixturevalue)
        cluster = _new_cluster(tmp_path_factory.mktemp(f"cluster-{name}"), name).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def redis_cluster(clusters_starting, tmp_path_factory):
    """One real 3-primary Redis Cluster for the session (tests/redis_topologies.py); flush it
    per test (or module)."""
    yield from _cluster(clusters_starting, "shared", tmp_path_factory)


@pytest.fixture
def spare_cluster(clusters_starting, tmp_path_factory):
    """A real 3-primary Redis Cluster of the test's own, to stop or kill nodes of; started
    while the tests before it ran when it could be."""
    yield from _cluster(clusters_starting, "spare", tmp_path_factory)


@pytest.fixture
def replicated_cluster(clusters_starting, tmp_path_factory):
    """A real 3-primary Redis Cluster with a replica of each primary, of the test's own, to
    kill nodes of and fail over; started while the tests before it ran when it could be."""
    yield from _cluster(clusters_starting, "replicated", tmp_path_factory)


@pytest.fixture
def single_cluster(clusters_starting, tmp_path_factory):
    """A real Redis Cluster of one primary owning every slot, of the test's own, to stall or
    stop; started while the tests before it ran when it could be (a cluster's node serves
    2 s after it starts at the soonest)."""
    yield from _cluster(clusters_starting, "single", tmp_path_factory)


@pytest.fixture(scope="session", autouse=True)
def servers_stopped():
    """At the session's end: every server sent SIGTERM without a wait (tests/process_util.py's
    ``stopping``) has stopped within its timeout."""
    from tests.process_util import stopping

    yield
    stopping.check()
