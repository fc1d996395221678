"""Sentinels, a primary and its replica on TLS only (``tls-port``, ``tls-replication yes``):
``rediss-sentinel://HOSTS/SERVICE/DB?ssl_ca_certs=…``.

A real set (tests/redis_sentinels.py, its certificates of a CA the test makes): the hub
serves SendMessage, GetTask and a stream through it, verified against the URL's CA, and
follows a failover the sentinels call; a wrong CA, or ``redis-sentinel://`` (no TLS) to
sentinels on TLS, answers each call -32603, as sentinels that refuse the URL's password do
(the hub starts: a Sentinel client connects at its first command), and no log line holds
the password.
"""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.redis_client import connect, release
from murmur_wsgi.hub.store.redis_pool import WaitingSentinelPool
from murmur_wsgi.hub.store.sentinel_url import parse
from tests.hub.conftest import HubClient, close_hub, hub_config, send_params
from tests.hub.sentinel_util import answers_unavailable, serves_across_a_failover
from tests.hub.test_streams import Reader
from tests.redis_sentinels import SentinelSet
from tests.tls_util import Authority

pytestmark = pytest.mark.one_store

PRIMARY = "primary-pw-never-logged"
SETTINGS = {"liveness_secs": 0.3, "sweep_interval_secs": 0.1, "timeout_secs": 1.0,
            "wait_replicas": 1}     # the replica acknowledges over TLS replication


@pytest.fixture(scope="module")
def authority(tmp_path_factory):
    return Authority(tmp_path_factory.mktemp("tls"), "sentinel-ca")


def _tls_set(directory, authority) -> SentinelSet:
    return SentinelSet(directory, down_after_ms=500, quick=True, password=PRIMARY,
                       tls=authority).start()


@pytest.fixture(scope="module")
def tls_set(tmp_path_factory, authority):
    """The module's set, for the tests that serve through it or are refused by it (its
    start, 2 to 3 s, was paid by each)."""
    started = _tls_set(tmp_path_factory.mktemp("sentinel"), authority)
    yield started
    started.stop_soon()


@pytest.fixture
def own_tls_set(tmp_path, authority):
    """A set of the test's own, for a failover (it kills the primary)."""
    started = _tls_set(tmp_path / "sentinel", authority)
    yield started
    started.stop_soon()


def test_the_url_gives_redis_py_tls_to_the_sentinels_and_the_primary(tmp_path):
    parts = parse("rediss-sentinel://:p@h:1,h:2/murmur/3?ssl_ca_certs=/ca.pem"
                  "&ssl_certfile=/hub.pem&ssl_keyfile=/hub.key&sentinel_password=s")
    assert (parts.sentinels, parts.service, parts.db, parts.password,
            parts.sentinel_password) == ((("h", 1), ("h", 2)), "murmur", 3, "p", "s")
    assert parts.tls == {"ssl": True, "ssl_ca_certs": "/ca.pem", "ssl_certfile": "/hub.pem",
                         "ssl_keyfile": "/hub.key"}
    assert parse("rediss-sentinel://h:1/murmur/0").tls == {"ssl": True}
    assert parse("redis-sentinel://h:1/murmur/0").tls == {}
    ca = Authority(tmp_path, "unused-ca").ca_file
    client = connect(f"rediss-sentinel://h:1/murmur/0?ssl_ca_certs={ca}", 1.0)
    try:
        pool = client.connection_pool
        assert isinstance(pool, WaitingSentinelPool)                   # bounded, waiting
        assert pool.connection_class.__name__ == "_SentinelSSLConnection"
        assert pool.connection_kwargs["ssl_ca_certs"] == ca
        sentinel = pool.sentinel_manager.sentinels[0].connection_pool
        assert sentinel.connection_class.__name__ == "SSLConnection"
        assert sentinel.connection_kwargs["ssl_ca_certs"] == ca
        assert sentinel.max_connections == 2 * pool.max_connections    # their own bound
    finally:
        release(client)


@pytest.mark.parametrize("query, says", [
    ("ssl_ca_cert={ca}", "takes sentinel_username, sentinel_password, ssl_ca_certs, "
                         "ssl_certfile, ssl_keyfile only, each once and none empty"),
    ("ssl_cert_reqs=none", "ssl_keyfile only"),
    ("ssl_ca_certs=", "none empty"),
    ("ssl_ca_certs={ca}&ssl_ca_certs={ca}", "each once"),
    ("ssl_ca_certs={ca}&password=x", "ssl_keyfile only"),
])
@pytest.mark.parametrize("scheme", ["rediss-sentinel", "redis-sentinel"])
def test_a_sentinel_query_redis_py_would_misread_exits_2_naming_store(tmp_path, capsys,
                                                                       scheme, query, says):
    from murmur_wsgi.cli import main

    ca = Authority(tmp_path, "query-ca").ca_file
    url = f"{scheme}://:{PRIMARY}@127.0.0.1:1/murmur/0?{query.format(ca=ca)}"
    path = tmp_path / "hub.yaml"
    path.write_text(f"store: {url}\ntenants:\n  t:\n    api_keys: []\n"
                    "    agents:\n      a: {agent: demo}\n")
    # NOTE: a --listen refused after the config: this never serves, whatever the file says.
    assert main(["hub", "--config", str(path), "--listen", "127.0.0.1:99999"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"murmur-wsgi: {path}: store: a {scheme} URL's query takes ")
    assert PRIMARY not in err and ca not in err
    if scheme == "rediss-sentinel":
        assert says in err
    else:               # TLS's files in the form without TLS: named, never dropped
        assert err.endswith("sentinel_password only, each once and none empty "
                            "(rediss-sentinel:// for TLS and its ssl_… files)\n")


def test_a_hub_serves_through_tls_sentinels_and_a_tls_primary(tls_set, caplog):
    hub = create_hub(hub_config(store=tls_set.url, redis=dict(SETTINGS)))
    try:
        rpc = HubClient(hub)
        task = rpc.send("over TLS everywhere")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert rpc.result("GetTask", {"id": task["id"]})["id"] == task["id"]
        stream = Reader(rpc.call("SendStreamingMessage", send_params("streamed"),
                                 buffered=False))
        try:
            events = stream.until_end()
        finally:
            stream.close()
        assert events and all("result" in event for event in events)
        final = events[-1]["result"]["statusUpdate"]["status"]["state"]
        assert final == "TASK_STATE_COMPLETED"
    finally:
        close_hub(hub)
    assert PRIMARY not in caplog.text


@pytest.mark.timed
def test_a_hub_on_tls_sentinels_follows_a_failover(own_tls_set, caplog):
    serves_across_a_failover(own_tls_set, SETTINGS)
    assert PRIMARY not in caplog.text


@pytest.mark.parametrize("form", ["another CA", "no TLS"])
def test_tls_sentinels_asked_with_a_wrong_ca_or_without_tls_answer_32603(tls_set, tmp_path,
                                                                          form, caplog):
    url = tls_set.url.partition("?")[0]
    if form == "another CA":
        url += f"?ssl_ca_certs={Authority(tmp_path, 'other-ca').ca_file}"
    else:
        url = url.replace("rediss-sentinel://", "redis-sentinel://")
    answers_unavailable(url, SETTINGS)
    assert caplog.text and PRIMARY not in caplog.text


@pytest.mark.parametrize("whose, logged", [("tls_host", "MasterNotFoundError"),
                                            ("node_tls_host", "ConnectionError")])
def test_certificates_that_name_another_host_answer_32603(tmp_path, authority, caplog,
                                                          whose, logged):
    """The host each is reached at is checked, as ``rediss://`` checks it: the sentinels'
    (``tls_host``: every certificate of the set for another name; none answers), or the
    primary's alone for the address the sentinels announce it at (``node_tls_host``: they
    answer, each connection to the primary is refused), never made unverified."""
    elsewhere = SentinelSet(tmp_path / "elsewhere", quick=True, tls=authority,
                            **{whose: "redis.example"}).start()
    try:
        answers_unavailable(elsewhere.url, SETTINGS)
    finally:
        elsewhere.stop_soon()
    assert f"failed: {logged}" in caplog.text


def test_mutual_tls_presents_the_hubs_certificate_to_sentinels_and_primary(tmp_path,
                                                                            authority):
    mutual = SentinelSet(tmp_path / "mutual", quick=True, tls=authority, mutual=True).start()
    try:
        answers_unavailable(mutual.url, SETTINGS)       # no certificate: refused
        cert, key = mutual.client_cert
        hub = create_hub(hub_config(store=f"{mutual.url}&ssl_certfile={cert}"
                                          f"&ssl_keyfile={key}", redis=dict(SETTINGS)))
        try:
            task = HubClient(hub).send("with the hub's certificate")
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        finally:
            close_hub(hub)
    finally:
        mutual.stop_soon()
