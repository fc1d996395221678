"""``murmur-wsgi hub key``: a key minted, listed and revoked answers (or is refused) by the
same running hub within seconds, with no restart and no task lost — on the memory store
(the hub re-reads its hub.yaml) and on Redis (the store's table, seen by every replica)."""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from murmur_wsgi import cli
from tests.e2e.conftest import CLOSE, child_env, http_get
from tests.e2e.hub_process import WAIT, HubProcess

pytestmark = pytest.mark.e2e

TAKES_EFFECT = 10.0             # seconds: hub/keys.py checks every 2 s


def hub_yaml(port: int, store: str, key: str) -> dict:
    return {"public_url": f"http://127.0.0.1:{port}", "store": store, "drain_timeout_secs": 1,
            "tenants": {"acme": {"api_keys": [hashlib.sha256(key.encode()).hexdigest()],
                                 "agents": {"echo": {"agent": "demo", "publish": True}}}}}


def hub_key_command(config, *argv) -> subprocess.CompletedProcess:
    """``murmur-wsgi hub key acme --config CONFIG ARGV…``, the command as an operator runs it."""
    return subprocess.run([sys.executable, "-m", "murmur_wsgi.cli", "hub", "key", "acme",
                           "--config", str(config), *argv], env=child_env(),
                          capture_output=True, text=True, timeout=WAIT, check=False)


@dataclasses.dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


def hub_key(config, *argv) -> Done:
    """``hub_key_command``'s work done by the command's ``main`` in this process: its exit
    status and output.

    PERF: each command costs a Python start and the package's imports (about 0.5 s), several
    on a test's path; what the running hub sees is the same hub.yaml and Redis table.
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["hub", "key", "acme", "--config", str(config), *argv])
    return Done(code, out.getvalue(), err.getvalue())


def card_status(hub, key: str) -> int:
    return http_get(hub.card_url(), {**CLOSE, "X-API-Key": key}, timeout=WAIT).status_code


def until_status(hub, key: str, status: int) -> float:
    """Poll the card with ``key`` until it answers ``status``; the seconds it took."""
    started = time.monotonic()
    while card_status(hub, key) != status:
        assert time.monotonic() - started < TAKES_EFFECT, f"{key} never answered {status}"
        time.sleep(0.1)  # wait-ok: polling another process with a deadline
    return time.monotonic() - started


def serve(request, directory, store_name: str):
    """A running hub on ``store_name`` ("redis": the session's redis-server, flushed), with a
    key of its own; ``config`` is its hub.yaml."""
    key = f"mhk_e2e-keys-{uuid.uuid4().hex[:8]}"
    store = "memory"
    if store_name == "redis":
        redis_server = request.getfixturevalue("redis_server")
        redis_server.flush()
        store = redis_server.url
    hub = HubProcess(directory, lambda port: hub_yaml(port, store, key), agent="echo", key=key)
    hub.config = directory / f"hub-{hub.port}.yaml"
    hub.store = store_name
    return hub


@pytest.fixture(scope="module", params=["memory", "redis"])
def served(request, tmp_path_factory):
    """One hub per store for the tests that leave its keys as they found them."""
    hub = serve(request, tmp_path_factory.mktemp("keys"), request.param)
    yield hub
    hub.stop_soon()


@pytest.fixture
def served_alone(request, tmp_path):
    """A hub on Redis of its own: the test revokes the key the hub was started with."""
    hub = serve(request, tmp_path, "redis")
    yield hub
    hub.stop()
    request.getfixturevalue("redis_server").flush()     # its minted key: no other's listing


def test_minted_then_revoked_in_the_running_hub(served):
    pid = served.proc.pid
    task = served.result("SendMessage", {"message": {
        "messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "kept"}]}})
    minted = hub_key(served.config)
    assert minted.returncode == 0, minted.stderr
    new_key = minted.stdout.strip()
    assert new_key.startswith("mhk_")
    took = until_status(served, new_key, 200)
    assert took < 5.0                           # the 2 s refresh period, and a margin
    digest = hashlib.sha256(new_key.encode()).hexdigest()
    listed = hub_key(served.config, "--list").stdout.splitlines()
    assert f"{digest}  hub.yaml" in listed and len(listed) == 2
    revoked = hub_key(served.config, "--revoke", digest[:12])
    assert (revoked.returncode, revoked.stdout) == (0, f"revoked {digest}\n")
    until_status(served, new_key, 401)
    assert hub_key(served.config, "--list").stdout.splitlines() == [listed[0]]
    # The same process, its tasks kept.
    assert served.proc.poll() is None and served.proc.pid == pid
    got = served.result("GetTask", {"id": task["task"]["id"]})
    assert got["status"]["state"] == "TASK_STATE_COMPLETED"


def test_revoke_needs_one_key(served):
    done = hub_key_command(served.config, "--revoke", "0000")
    assert done.returncode == 2
    assert done.stderr == ("murmur-wsgi: --revoke 0000: names no key of tenant acme "
                           "(murmur-wsgi hub key acme --list shows them)\n")


def test_a_key_minted_on_another_host_reaches_this_replica(served_alone, tmp_path):
    served = served_alone
    other_host = tmp_path / "other-host.yaml"
    shutil.copy(served.config, other_host)
    minted = hub_key(other_host)
    new_key = minted.stdout.strip()
    until_status(served, new_key, 200)
    # A key this replica's own file still lists, revoked from the other host: refused.
    revoked = hub_key(other_host, "--revoke", hashlib.sha256(served.key.encode()).hexdigest())
    assert revoked.returncode == 0, revoked.stderr
    until_status(served, served.key, 401)
    assert card_status(served, new_key) == 200
