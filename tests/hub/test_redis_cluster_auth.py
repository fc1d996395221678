"""A Redis Cluster whose nodes ask for a password (``requirepass``) or an ACL user (the
default user off): ``redis-cluster://[USER]:PASSWORD@HOST:PORT,…``, each a real cluster.

The hub serves through each (a send, its read, a list across the slots). Nodes that refuse
the URL's password (wrong, or none given) refuse the hub as it starts: ``ConfigError``
naming ``store`` (the slot map is read then), never showing the password. Over TLS
(``rediss-cluster://…?ssl_ca_certs=CA``, the nodes' bus on TLS too) the hub verifies every
node against the CA; with another CA's, the hub does not start (``ConfigError`` naming
``store``).
"""
from __future__ import annotations

import subprocess
import sys
from urllib.parse import quote

import pytest

from murmur_wsgi.cli import main
from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config_schema import ConfigError
from tests.e2e.conftest import child_env, kill_group
from tests.hub.conftest import FAST, HubClient, close_hub, hub_config
from tests.redis_util import free_port
from tests.redis_topologies import Cluster
from tests.tls_util import Authority

pytestmark = pytest.mark.one_store

PASSWORD = "cluster-pw-never-logged"


@pytest.fixture(scope="module", params=["requirepass", "acl user"])
def guarded_cluster(request, tmp_path_factory):
    username = "hub" if request.param == "acl user" else None
    started = Cluster(tmp_path_factory.mktemp("cluster-auth"), password=PASSWORD,
                      username=username).start()
    yield started
    started.stop()


def test_a_hub_logs_in_to_every_node(guarded_cluster):
    hub = create_hub(hub_config(store=guarded_cluster.url, redis=dict(FAST)))
    try:
        rpc = HubClient(hub)
        tasks = [rpc.send(f"hello {n}") for n in range(4)]       # in several slots
        assert all(t["status"]["state"] == "TASK_STATE_COMPLETED" for t in tasks)
        assert rpc.result("GetTask", {"id": tasks[0]["id"]})["id"] == tasks[0]["id"]
        listed = {t["id"] for t in rpc.result("ListTasks", {})["tasks"]}
        assert {t["id"] for t in tasks} <= listed
    finally:
        close_hub(hub)


@pytest.mark.parametrize("given", ["a wrong password", "no password"])
def test_a_refused_password_stops_the_hub_naming_store_and_never_shows_it(guarded_cluster,
                                                                          given, caplog):
    scheme, _, rest = guarded_cluster.url.partition("://")
    userinfo, _, hosts = rest.partition("@")
    user = userinfo.partition(":")[0]
    url = f"{scheme}://{user}:wrong-{PASSWORD}@{hosts}" if given == "a wrong password" \
        else f"{scheme}://{hosts}"
    with pytest.raises(ConfigError) as refused:
        create_hub(hub_config(store=url, redis=dict(FAST)))
    assert str(refused.value).startswith("store: ") and "user or password" in str(refused.value)
    assert PASSWORD not in str(refused.value) and PASSWORD not in caplog.text


def _wrong_password_file(cluster, tmp_path):
    """A hub.yaml whose store is ``cluster``'s URL with a wrong password."""
    scheme, _, rest = cluster.url.partition("://")
    userinfo, _, hosts = rest.partition("@")
    url = f"{scheme}://{userinfo.partition(':')[0]}:wrong-{PASSWORD}@{hosts}"
    path = tmp_path / "hub.yaml"
    path.write_text(f"store: {url}\npublic_url: http://hub.example\n"
                    "tenants:\n  t:\n    api_keys: []\n    agents:\n      a: {agent: demo}\n")
    return path


def test_hub_key_on_a_cluster_that_refuses_the_password_is_one_line(guarded_cluster,
                                                                   tmp_path, capsys):
    path = _wrong_password_file(guarded_cluster, tmp_path)
    assert main(["hub", "key", "t", "--list", "--config", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("murmur-wsgi: store: ") and "user or password" in captured.err
    assert captured.err.count("\n") == 1 and PASSWORD not in captured.err + captured.out


def test_murmur_wsgi_hub_refuses_a_refused_password_before_gunicorn_starts(guarded_cluster,
                                                                            tmp_path):
    """As ``--dev`` does: one line naming ``store`` and exit 2, no worker forked (before,
    each worker's traceback in the log, and gunicorn's exit 3)."""
    path = _wrong_password_file(guarded_cluster, tmp_path)
    for dev in ([], ["--dev"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "murmur_wsgi.cli", "hub", "--config", str(path),
             "--listen", f"127.0.0.1:{free_port()}", *dev], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True, env=child_env())
        try:
            out, err = proc.communicate(timeout=30)
        finally:
            kill_group(proc)
        assert (proc.returncode, out) == (2, ""), err
        assert err == ("murmur-wsgi: store: the Redis Cluster's nodes refused the URL's "
                       "user or password (AuthenticationError)\n")


def test_rediss_cluster_verifies_every_node_against_the_operators_ca(tmp_path):
    authority = Authority(tmp_path / "tls", "cluster-ca")
    started = Cluster(tmp_path / "cluster-tls", password=PASSWORD, tls=authority).start()
    try:
        assert started.url.startswith("rediss-cluster://")
        hub = create_hub(hub_config(store=started.url, redis=dict(FAST)))
        try:
            rpc = HubClient(hub)
            tasks = [rpc.send(f"over TLS {n}") for n in range(4)]
            assert all(t["status"]["state"] == "TASK_STATE_COMPLETED" for t in tasks)
            assert rpc.result("GetTask", {"id": tasks[-1]["id"]})["id"] == tasks[-1]["id"]
        finally:
            close_hub(hub)
        # Another CA's: no node is verified, so none is connected, as none reachable.
        other = started.url.replace(quote(authority.ca_file),
                                    quote(Authority(tmp_path / "other", "other-ca").ca_file))
        with pytest.raises(ConfigError) as refused:
            create_hub(hub_config(store=other, redis=dict(FAST)))
        assert str(refused.value) == ("store: the Redis Cluster's nodes' TLS certificates are "
                                      "not signed by the URL's ssl_ca_certs (or the system's CAs)")
    finally:
        started.stop()


def test_a_cluster_whose_certificates_name_another_host_is_refused_saying_so(tmp_path):
    """Signed by the URL's CA, for another name: a mismatch, not a CA that did not sign."""
    authority = Authority(tmp_path / "tls", "cluster-ca")
    started = Cluster(tmp_path / "cluster", size=1, tls=authority,
                      tls_host="elsewhere.example").start()
    try:
        with pytest.raises(ConfigError) as refused:
            create_hub(hub_config(store=started.url, redis=dict(FAST)))
        assert str(refused.value) == (
            "store: the Redis Cluster's nodes' TLS certificates are not for the host the URL "
            "names (IP address mismatch, certificate is not valid for '127.0.0.1'.)")
    finally:
        started.stop()
