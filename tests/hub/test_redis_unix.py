"""A hub on a Redis of its own host, through its unix socket (``store: unix:///PATH?db=N``).

The session's redis-server listens on a loopback port and on a socket: a hub on each
address of that one server is two replicas of one store. What one writes the other
reads, follows and cancels; the URL's forms are checked when hub.yaml loads; a socket
that is not there answers -32603, as a Redis that is down does over TCP.
"""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config_schema import ConfigError

from tests.hub.agents import gate
from tests.hub.conftest import FAST, HubClient, close_hub, hub_config, sse_events, wait_until

UNAVAILABLE = {"code": -32603, "message": "Internal error: the hub's task store is "
                                          "unavailable; try again shortly"}


@pytest.fixture
def both(redis_server):
    """A hub on the server's TCP address and one on its socket, as HubClients."""
    redis_server.flush()
    hubs = [create_hub(hub_config(store=url, redis=dict(FAST)))
            for url in (redis_server.url, redis_server.unix_url)]
    yield [HubClient(h) for h in hubs]
    for h in hubs:
        close_hub(h)


def _state(rpc, task_id):
    return rpc.result("GetTask", {"id": task_id})["status"]["state"]


def test_a_blocking_send_on_the_socket_is_read_over_tcp(both, redis_server):
    tcp, unix = both
    assert unix.hub.store.shared and unix.hub.config.shared
    task = unix.send("hello over the socket")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    # The socket hub's connections are the socket's (Redis names their address so).
    client = redis_server.client()
    try:
        addresses = [entry["addr"] for entry in client.client_list()]
    finally:
        client.close()
    assert any(addr.startswith(str(redis_server.socket_path)) for addr in addresses)
    assert unix.result("GetTask", {"id": task["id"]}) == tcp.result("GetTask",
                                                                     {"id": task["id"]})
    assert [t["id"] for t in tcp.result("ListTasks", {})["tasks"]] == [task["id"]]


def test_a_run_over_tcp_is_followed_and_canceled_on_the_socket(both):
    tcp, unix = both
    tcp.agent = unix.agent = "held"
    followed = tcp.send("g-unix-follow", configuration={"returnImmediately": True})
    wait_until(lambda: _state(unix, followed["id"]) == "TASK_STATE_WORKING")
    stream = unix.call("SubscribeToTask", {"id": followed["id"]}, buffered=False)
    chunks = iter(stream.response)
    assert b"TASK_STATE_WORKING" in next(chunks)          # the replay, then live
    gate("g-unix-follow").set()
    assert "TASK_STATE_COMPLETED" in b"".join(chunks).decode()

    canceled = tcp.send("g-unix-cancel", configuration={"returnImmediately": True})
    wait_until(lambda: _state(unix, canceled["id"]) == "TASK_STATE_WORKING")
    assert unix.result("CancelTask", {"id": canceled["id"]})["status"]["state"] == \
        "TASK_STATE_CANCELED"
    events = sse_events(tcp.call("SubscribeToTask", {"id": canceled["id"]}))
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"


def test_a_socket_that_is_not_there_answers_32603_and_logs_no_secret(tmp_path, caplog):
    url = f"unix://{tmp_path}/absent.sock?db=0&password=do-not-log-me"
    hub = create_hub(hub_config(store=url, redis=dict(FAST)))
    try:
        rpc = HubClient(hub)
        answer = rpc.call("SendMessage", {"message": {"messageId": "m-absent", "role":
                                                      "ROLE_USER", "parts": [{"text": "hi"}]}})
        assert answer.status_code == 200
        assert answer.get_json()["error"] == UNAVAILABLE
        assert rpc.error("GetTask", {"id": "t-absent"}) == UNAVAILABLE
    finally:
        hub.close(drain_timeout=5)
    assert "do-not-log-me" not in caplog.text


@pytest.mark.parametrize("url", ["unix:///run/redis/redis.sock", "unix:///run/redis.sock?db=3",
                                 "unix:///run/redis.sock?db=0&password=p%40ss",
                                 "unix:///run/redis.sock?username=hub&password=p%2Bq"])
def test_a_socket_s_url_loads(url):
    from murmur_wsgi.hub.config import load_config

    config = load_config(hub_config(store=url))
    assert config.shared and config.store_url() == url


@pytest.mark.parametrize("url, says", [
    ("unix://run/redis.sock", "absolute path"),
    ("unix:run/redis.sock", "absolute path"),
    ("unix:/run/redis.sock", "absolute path"),
    ("unix:///run/redis/", "absolute path"),
    ("unix:///run/redis.sock?password=a#b", "holds no #"),
    ("unix:///" + "r" * 120 + ".sock", "at most 107 bytes"),
    ("unix:///run/redis.sock?db=zero", "database number"),
    ("unix:///run/redis.sock?db=%C2%B2", "database number"),
    ("unix:///run/redis.sock?socket_timeout=0", "db, username and password only"),
])
def test_a_socket_s_url_that_is_wrong_is_refused_naming_the_key(url, says):
    secret = "" if "#" in url else ("&" if "?" in url else "?") + "password=never-echoed"
    with pytest.raises(ConfigError) as refused:
        create_hub(hub_config(store=url + secret))
    assert "store" in str(refused.value) and says in str(refused.value)
    assert "never-echoed" not in str(refused.value)
