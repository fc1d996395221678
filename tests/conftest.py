"""Shared fixtures: a door on Werkzeug's test client, and a JSON-RPC request builder."""
from __future__ import annotations

import json
import threading

import pytest
from werkzeug.test import Client

from murmur_wsgi import create_app

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


def _uses_the_cluster(item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "redis_cluster" in item.fixturenames or "cluster" in params.values()


@pytest.fixture(scope="session", autouse=True)
def cluster_starting(request, tmp_path_factory):
    """The session's Redis Cluster, started on a thread as the session begins when a test to
    run may use it (fixture redis_cluster, or a param "cluster"): a cluster's start mostly
    waits (redis-cli's join, then the nodes' 2 s before they serve), and the tests before
    the first that uses it run meanwhile. (cluster, thread, what it raised) or None."""
    if not any(_uses_the_cluster(item) for item in request.session.items):
        yield None
        return
    from tests.redis_topologies import Cluster

    cluster, raised = Cluster(tmp_path_factory.mktemp("cluster")), []

    def start():
        try:
            cluster.start()
        except BaseException as ex:  # noqa: BLE001 - raised by redis_cluster, on its thread
            raised.append(ex)

    thread = threading.Thread(target=start, name="cluster-start", daemon=True)
    thread.start()
    yield cluster, thread, raised
    thread.join()
    cluster.stop()


@pytest.fixture(scope="session")
def redis_cluster(cluster_starting, tmp_path_factory):
    """One real 3-primary Redis Cluster for the session (tests/redis_topologies.py), once
    cluster_starting started it; flush it per test (or module)."""
    if cluster_starting is None:                  # asked for by name only (getfixturevalue)
        from tests.redis_topologies import Cluster

        cluster = Cluster(tmp_path_factory.mktemp("cluster")).start()
        yield cluster
        cluster.stop()
        return
    cluster, thread, raised = cluster_starting
    thread.join()
    if raised:
        raise raised[0]
    yield cluster


@pytest.fixture(scope="session", autouse=True)
def servers_stopped():
    """At the session's end: every server sent SIGTERM without a wait (tests/process_util.py's
    ``stopping``) has stopped within its timeout."""
    from tests.process_util import stopping

    yield
    stopping.check()
