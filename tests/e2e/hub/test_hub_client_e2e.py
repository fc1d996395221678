"""The project's own client and CLI against a real ``murmur-wsgi hub``, on memory and on Redis.

The same commands as on a door: ``card``, ``send`` (held, ``--no-wait``,
``--stream``), ``get``, ``ps``, ``subscribe``, ``cancel`` and ``push``, with the
tenant's API key (``--api-key``, ``$MURMUR_API_KEY``) and with a JWT and its
tenant (``--token``, ``--tenant``, ``$MURMUR_TENANT``). ``watch`` and ``stop``, the
door's own methods, say a hub does not serve them.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time

import jwt
import pytest

from murmur_wsgi.client import A2AClient, DoorClient, HttpRefusal, TaskNotFound
from tests.e2e.cli_util import check_send_ps_cancel, no_ambient_agent, run_cli
from tests.e2e.conftest import child_env
from tests.e2e.hub_process import PREFIX, WAIT, HubProcess
from tests.hub.push_util import SECRET as PUSH_SECRET

pytestmark = pytest.mark.e2e

KEY = "mhk_e2e-client-acme"
JWT_SECRET = "e2e-client-jwt-secret-" + "y" * 24
HOOK_PORT = 48443               # push create checks the URL only: nothing listens there


def hub_yaml(port: int, store: str) -> dict:
    return {
        "public_url": f"http://127.0.0.1:{port}",
        "store": store,
        "drain_timeout_secs": 1,
        "auth": {"jwt": {"secret": JWT_SECRET}},
        "push": {"enabled": True, "secret": PUSH_SECRET, "ports": [HOOK_PORT],
                 "allow_networks": ["127.0.0.0/8"]},
        "tenants": {
            "acme": {"api_keys": [hashlib.sha256(KEY.encode()).hexdigest()],
                     "agents": {"echo": {"agent": "demo", "publish": True,
                                         "description": "echo", "version": "1.0.0"}}},
            "globex": {"agents": {}}},
    }


def a_jwt(tenants=("acme",)) -> str:
    return jwt.encode({"sub": "e2e", "tenants": list(tenants), "exp": int(time.time()) + 600},
                      JWT_SECRET, algorithm="HS256")


@pytest.fixture(scope="module", params=["memory", "redis"])
def hub(request, tmp_path_factory):
    store = "memory"
    if request.param == "redis":
        redis = request.getfixturevalue("redis_server")
        store = redis.url
    server = HubProcess(tmp_path_factory.mktemp("hub-client"),
                        lambda port: hub_yaml(port, store), agent="echo", key=KEY)
    server.agent_url = f"{server.url}{PREFIX}echo"
    yield server
    server.stop_soon()


@pytest.fixture
def cli(hub, capsys, monkeypatch, tmp_path):
    """``cli(*argv)`` -> ``(status, stdout, stderr)``: ``murmur-wsgi`` against the hub agent."""
    no_ambient_agent(monkeypatch, tmp_path / "home")

    def run(*argv, key=KEY, url=None):
        extra = ["--url", url or hub.agent_url] + (["--api-key", key] if key else [])
        return run_cli(capsys, [*argv, *extra])
    return run


def test_card_with_the_key_names_the_hub_agent(cli, hub):
    status, out, err = cli("card")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == "echo 1.0.0"
    assert f"url:       {hub.agent_url} (JSONRPC, A2A 1.0)" in lines
    assert "door:      API key (X-API-Key) or bearer JWT with X-Tenant-ID" in lines


def test_card_url_is_taken_as_the_agent(cli, hub):
    status, out, err = cli("card", "--json", url=hub.card_url())
    assert status == 0, err
    assert json.loads(out)["supportedInterfaces"][0]["url"] == hub.agent_url


def test_no_credential_names_what_the_hub_takes(cli, hub):
    status, out, err = cli("card", key=None)
    assert (status, out) == (2, "")
    assert err == (f"murmur-wsgi: the agent at {hub.agent_url} refused the request: 401 "
                   "unauthenticated; a hub agent takes --api-key KEY (or $MURMUR_API_KEY), "
                   "or --token JWT with --tenant TENANT\n")


def test_send_held_no_wait_get_ps_and_cancel(cli):
    check_send_ps_cancel(cli, "hello hub")


def test_send_stream_and_subscribe(cli, hub):
    status, out, err = cli("send", "--stream", "/stream 2")
    assert status == 0, err
    # NOTE: before, the answer's last chunk (replacing the tokens) showed as one more
    # [artifact], and its usage part as raw JSON.
    assert out.splitlines() == [
        "[submitted]", "[working]", "[artifact]    answer: chunk 1",
        "[artifact]    answer: chunk 2", "[replaced]    answer: chunk 1", "              chunk 2",
        "              usage: 0 input, 0 output tokens; 0.0 credits", "[completed]"]
    status, out, err = cli("tasks", "--limit", "1", "--json")        # the newest first
    status, out, err = cli("get", json.loads(out)["id"])
    assert status == 0, err
    assert out.splitlines()[-3:] == ["answer:   chunk 1", "          chunk 2",
                                     "usage:    0 input, 0 output tokens; 0.0 credits"]
    with A2AClient(hub.agent_url, api_key=KEY, timeout=WAIT) as client:
        task = client.send("/sleep 1", return_immediately=True)
    status, out, err = cli("subscribe", task["id"])
    assert status == 0, err
    assert out.splitlines()[-1].startswith("[completed]")


def test_jwt_with_tenant_from_the_environment(cli, monkeypatch, hub):
    monkeypatch.setenv("MURMUR_TENANT", "acme")
    assert cli("send", "by jwt", "--token", a_jwt(), key=None) == (0, "by jwt\n", "")
    monkeypatch.delenv("MURMUR_TENANT")
    status, _, err = cli("send", "by jwt", "--token", a_jwt(), key=None)
    assert status == 2 and "401 no tenant in context" in err


def test_a_credential_on_the_command_line_is_sent_alone(cli, monkeypatch):
    """The other kind's variable, left in the environment, is not sent beside it (the
    hub would refuse both: 401 "send one credential")."""
    monkeypatch.setenv("MURMUR_API_KEY", KEY)
    assert cli("send", "by jwt", "--token", a_jwt(), "--tenant", "acme", key=None) == \
        (0, "by jwt\n", "")
    monkeypatch.delenv("MURMUR_API_KEY")
    monkeypatch.setenv("MURMUR_DOOR_TOKEN", a_jwt())
    assert cli("send", "by key") == (0, "by key\n", "")


def test_a_refusal_names_the_credential_the_hub_did_not_accept(cli, monkeypatch, hub):
    """A 401 says which credential was sent, and from where, never its value; only a
    request that carried none is told what a hub takes."""
    refused = f"murmur-wsgi: the agent at {hub.agent_url} refused the request: 401 "
    token = a_jwt(["globex"])
    assert cli("card", key="mhk_e2e-wrong") == (2, "", refused + (
        "unauthenticated; it did not accept the API key from --api-key: give a key of the "
        "agent's tenant that is not revoked\n"))
    assert cli("card", "--token", token, "--tenant", "acme", key=None) == (2, "", refused + (
        "unauthenticated; it did not accept the JWT from --token for tenant 'acme': give one "
        "the hub verifies (its auth.jwt), not expired, whose tenants claim names the "
        "tenant\n"))
    assert cli("card", "--token", token, key=None) == (2, "", refused + (
        "no tenant in context; a JWT needs the tenant it acts for: --tenant TENANT (or "
        "$MURMUR_TENANT)\n"))
    assert cli("card", "--token", token) == (2, "", refused + (
        "send one credential: X-API-Key or Authorization, not both; it was sent an API key "
        "(--api-key) and a token (--token): give one of them\n"))
    monkeypatch.setenv("MURMUR_API_KEY", "mhk_e2e-wrong")
    status, out, err = cli("card", key=None)
    assert (status, out) == (2, "")
    assert err.endswith("; it did not accept the API key from $MURMUR_API_KEY: give a key of "
                        "the agent's tenant that is not revoked\n")
    assert "mhk_e2e-wrong" not in err


def test_push_create_get_list_delete(cli):
    status, out, _ = cli("send", "--no-wait", "/sleep 5")
    task_id = out.strip()
    hook = f"https://127.0.0.1:{HOOK_PORT}/hook"
    status, out, err = cli("push", "create", task_id, "--to", hook, "--config", "cfg-1")
    assert status == 0, err
    created = json.loads(out)
    assert (created["id"], created["taskId"], created["url"]) == ("cfg-1", task_id, hook)
    assert created["authentication"]["credentials"]          # the key, in this answer only
    status, out, _ = cli("push", "list", task_id)
    assert status == 0 and out.startswith(f"cfg-1  {hook}  failures ")
    status, out, _ = cli("push", "get", task_id, "--config", "cfg-1")
    assert status == 0 and json.loads(out)["id"] == "cfg-1"
    assert cli("push", "delete", task_id, "--config", "cfg-1") == \
        (0, f"deleted:  cfg-1 of task {task_id}\n", "")
    assert cli("push", "list", task_id)[1] == "no push configs\n"
    assert cli("cancel", task_id)[0] == 0


@pytest.mark.parametrize("command, method", [("watch", "murmur.WatchSession"),
                                             ("stop", "murmur.StopSession")])
def test_the_doors_own_methods_are_refused_plainly(cli, hub, command, method):
    status, out, err = cli(command)
    assert (status, out) == (2, "")
    assert err == (f"murmur-wsgi: {command} ({method}) is a Murmur door's own method: the "
                   f"agent at {hub.agent_url} (a hub agent, or another A2A server) does not "
                   "serve it\n")


def test_client_posts_to_the_cards_url_with_every_credential(hub):
    with DoorClient(hub.agent_url, token=a_jwt(), tenant="acme", timeout=WAIT,
                    headers={"X-Trace": "e2e"}) as client:
        assert client.endpoint == hub.agent_url
        with pytest.raises(TaskNotFound):
            client.get("tsk_nosuch")
        request = client.session.get(client.card_url, headers=client.headers, timeout=WAIT)
        assert request.request.headers["X-Tenant-ID"] == "acme"
        assert request.request.headers["X-Trace"] == "e2e"
    with A2AClient(hub.agent_url, token=a_jwt(["globex"]), tenant="acme",
                   timeout=WAIT) as stranger:
        with pytest.raises(HttpRefusal) as info:
            stranger.card()
    assert (info.value.status, info.value.error) == (401, "unauthenticated")


def test_the_command_reads_the_key_from_the_environment(hub, tmp_path):
    env = child_env(MURMUR_API_KEY=KEY, MURMUR_DOOR_URL=hub.agent_url,
                    MURMUR_WSGI_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "murmur_wsgi.cli", "send", "from env"],
                          env=env, capture_output=True, text=True, timeout=WAIT, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "from env\n", "")
