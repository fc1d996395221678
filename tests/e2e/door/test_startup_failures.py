"""Start-up failures of ``murmur-wsgi serve`` and ``murmur-wsgi hub``, through the real
command: one line on stderr and exit 2, under gunicorn as under ``--dev``."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import yaml

from tests.e2e.conftest import REPO, child_env, free_port
from tests.process_util import stopping

pytestmark = pytest.mark.e2e

WAIT = 30.0
DOOR = {"name": "x", "version": "0.1.0", "agent": "nosuch_mod:agent"}
HUB = {"public_url": "http://127.0.0.1:41880",
       "tenants": {"acme": {"agents": {"echo": {"agent": "nosuch_mod:agent"}}}}}


def command(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "murmur_wsgi.cli", *argv], cwd=REPO,
                          env=child_env(), capture_output=True, text=True, timeout=WAIT,
                          check=False)


def write(tmp_path, data, name="conf.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if isinstance(data, dict) else data)
    return str(path)


def one_line(done) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("dev", [[], ["--dev"]], ids=["gunicorn", "dev"])
def test_door_agent_that_cannot_be_imported(tmp_path, dev):
    done = command("serve", "--config", write(tmp_path, DOOR), "--listen",
                   f"127.0.0.1:{free_port()}", *dev)
    assert one_line(done) == ("murmur-wsgi: agent: cannot import nosuch_mod: No module named "
                              "'nosuch_mod'")


@pytest.mark.parametrize("dev", [[], ["--dev"]], ids=["gunicorn", "dev"])
def test_hub_agent_that_cannot_be_imported(tmp_path, dev):
    path = write(tmp_path, HUB)
    done = command("hub", "--config", path, "--listen", f"127.0.0.1:{free_port()}", *dev)
    assert one_line(done) == ("murmur-wsgi: tenants.acme.agents.echo.agent: cannot import "
                              "nosuch_mod: No module named 'nosuch_mod'")


@pytest.mark.parametrize("app", ["serve", "hub"])
@pytest.mark.parametrize("dev", [[], ["--dev"]], ids=["gunicorn", "dev"])
def test_a_port_in_use(tmp_path, app, dev):
    config = write(tmp_path, dict(DOOR, agent="demo")) if app == "serve" else \
        write(tmp_path, {"public_url": "http://127.0.0.1:41880"})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        done = command(app, "--config", config, "--listen", listen, *dev)
    assert one_line(done) == f"murmur-wsgi: {listen} is in use; choose another with --listen"


@pytest.mark.parametrize("app", ["serve", "hub"])
@pytest.mark.parametrize("dev", [[], ["--dev"]], ids=["gunicorn", "dev"])
@pytest.mark.parametrize("port", ["99999", "4187\u0663"], ids=["past-65535", "arabic-digit"])
def test_a_port_that_is_not_one(tmp_path, app, dev, port):
    # NOTE: before, getaddrinfo took 99999 as 34463 and the check passed: gunicorn's bind
    # then raised OverflowError, a traceback and exit 1, and the dev server served on
    # 34463; a port in another script's digits was read as its number.
    config = write(tmp_path, dict(DOOR, agent="demo")) if app == "serve" else \
        write(tmp_path, {"public_url": "http://127.0.0.1:41880"})
    listen = f"127.0.0.1:{port}"
    done = command(app, "--config", config, "--listen", listen, *dev)
    assert one_line(done) == (f"murmur-wsgi: {listen}: cannot listen there: the port must be "
                              "a number from 0 to 65535")


@pytest.mark.parametrize("app, text, line", [
    ("serve", "name: x\nversion: [\n", "is not valid YAML at line 3"),
    ("serve", "name: x\nversion: 0.1.0\nagent: demo\nlifecycle: {task_acceptance: maybe}\n",
     "lifecycle.task_acceptance: "),
    ("hub", "limits: {concurrency: 0}\n", "limits.concurrency: "),
])
@pytest.mark.parametrize("dev", [[], ["--dev"]], ids=["gunicorn", "dev"])
def test_a_bad_manifest(tmp_path, app, text, line, dev):
    path = write(tmp_path, text)
    done = command(app, "--config", path, "--listen", f"127.0.0.1:{free_port()}", *dev)
    assert one_line(done).startswith(f"murmur-wsgi: {path}: {line}")


def _door_on_a_chosen_port(tmp_path, manifest: dict) -> tuple[str, dict, str]:
    """Serve ``manifest`` (no internal_port): the URL it announced, its card, its log."""
    import re
    import time

    from tests.e2e.conftest import START_DEADLINE, spawn, stop_process, wait_served

    path = write(tmp_path, manifest)
    log = tmp_path / "door.log"
    proc = spawn([sys.executable, "-m", "murmur_wsgi.cli", "serve", "--config", path], log,
                 child_env(MURMUR_WSGI_HOME=str(tmp_path / "home")))
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not re.search(r"listening on (http://\S+)", log.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)  # wait-ok: the server's first line, with a deadline
        url = re.search(r"listening on (http://\S+)", log.read_text()).group(1)
        card = wait_served(proc, url + "/.well-known/agent-card.json", deadline, "the door",
                           log.read_text).json()
        said = log.read_text()
    finally:
        # PERF: nothing here is about the door's stop: ``stopping`` waits for it (and fails
        # the session's end if it does not stop), the test goes on.
        stopping.stop(proc, lambda: stop_process(proc, 40, "the door", log.read_text))
    return url, card, said


def test_a_door_on_a_random_port_says_where(tmp_path):
    url, card, log = _door_on_a_chosen_port(tmp_path, {
        "name": "upper", "version": "0.1.0", "inference": {"transport": "process"},
        "agent": {"process": [sys.executable, "examples/harness_upper.py"]}})
    assert card["name"] == "upper"
    assert log.splitlines()[0] == ("murmur-wsgi: the manifest names no port "
                                   f"(network.internal_port): listening on {url}")


def test_a_door_on_an_ipv6_host_listens_there(tmp_path):
    # NOTE: before, network.host: "::1" was joined to its port as ::1:<port>, which gunicorn
    # refused ("Error: '' is not a valid port number.", exit 1).
    url, card, _ = _door_on_a_chosen_port(
        tmp_path, {"name": "six", "version": "0.1.0", "network": {"host": "::1"}})
    assert url.startswith("http://[::1]:"), url
    # NOTE: the card names a loopback address localhost, as for 127.0.0.1.
    assert card["supportedInterfaces"][0]["url"] == "http://localhost:" + url.rpartition(":")[2]
