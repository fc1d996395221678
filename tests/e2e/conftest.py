"""The door as a real process: ``murmur-wsgi serve`` (gunicorn -k gevent) on a free loopback port.

``start_door(where, manifest)`` is a context manager for a custom manifest;
``door_server`` is one door per module on conf/murmur.yaml's content. Both run
the README's command, ``python -m murmur_wsgi.cli serve --config FILE --listen
HOST:PORT``, from the repository root, poll the card until a deadline, and on
exit send SIGTERM; tests/process_util.py's ``stopping`` waits for the process to end
meanwhile, and the session's end fails if it did not within its timeout.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

from murmur_wsgi.uris import CAPSULE_URI, CARD_PATH
from tests.ports import free_port  # noqa: F401 (the servers the e2e tests start)
from tests.process_util import stopping

REPO = Path(__file__).resolve().parents[2]
DEFAULT_MANIFEST_FILE = REPO / "conf" / "murmur.yaml"
START_DEADLINE = 20.0           # seconds for gunicorn to boot and serve the card
POLL_TIMEOUT = 0.5              # per card request while polling
STOP_TIMEOUT = 40.0             # gunicorn_conf.graceful_timeout (30 s) plus margin
PORT_ATTEMPTS = 3               # a free port can be taken between probe and bind


# NOTE: every request here closes its connection. gunicorn's gevent worker waits
# for idle keep-alive connections on SIGTERM (up to graceful_timeout, 30 s), and a
# `requests` response still referenced keeps its connection open.
CLOSE = {"Connection": "close"}


def http_get(url: str, headers: dict | None = None, timeout: float = 10) -> requests.Response:
    return requests.get(url, headers={**CLOSE, **(headers or {})}, timeout=timeout)


def http_post(url: str, data, headers: dict | None = None,
              timeout: float = 10) -> requests.Response:
    return requests.post(url, data=data, headers={**CLOSE, **(headers or {})}, timeout=timeout)


def default_manifest() -> dict:
    """conf/murmur.yaml, as a mapping."""
    with open(DEFAULT_MANIFEST_FILE, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def write_manifest(directory: Path, manifest: dict, name: str = "murmur.yaml") -> Path:
    path = Path(directory) / name
    path.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    return path


def serve_argv(manifest_path: Path, listen: str) -> list[str]:
    """The README's ``murmur-wsgi serve``, run by this interpreter."""
    return [sys.executable, "-m", "murmur_wsgi.cli", "serve", "--config", str(manifest_path),
            "--listen", listen]


def child_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_WSGI_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class DoorStartError(RuntimeError):
    """The server (a door or a hub) exited, or did not serve its card, before the deadline."""


@dataclasses.dataclass
class DoorProcess:
    """A running door: its base URL, manifest, process, card and session."""

    url: str
    manifest_path: Path
    proc: subprocess.Popen
    log_path: Path
    home: Path | None = None            # $MURMUR_WSGI_HOME: running record, session trace
    card: dict | None = None
    session_id: str | None = None
    stop_seconds: float | None = None

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def card_url(self) -> str:
        return self.url + CARD_PATH

    def log(self) -> str:
        """Everything the server wrote to stdout and stderr so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, timeout: float = STOP_TIMEOUT) -> float:
        """SIGTERM, wait up to ``timeout``; kill on timeout. Return seconds it took to stop."""
        if self.stop_seconds is None:
            self.stop_seconds = stop_process(self.proc, timeout, "the door", self.log)
        return self.stop_seconds

    def stop_soon(self, timeout: float = STOP_TIMEOUT) -> None:
        """``stop``, its wait left to ``stopping`` (nothing after is about this door)."""
        if self.stop_seconds is None:
            stopping.stop(self.proc, lambda: stop_process(self.proc, timeout, "the door",
                                                          self.log))


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group this fixture started (arbiter and its worker)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def stop_process(proc: subprocess.Popen, timeout: float, what: str, log) -> float:
    """SIGTERM ``proc`` and wait up to ``timeout``; past it SIGKILL its group and fail with
    ``log()``, the server's output. Return the seconds it took to stop."""
    started = time.monotonic()
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        raise AssertionError(f"{what} did not stop within {timeout}s of SIGTERM; killed.\n"
                             + log()) from None
    return time.monotonic() - started


def spawn(argv: list[str], log_path: Path, env: dict | None = None,
          cwd: Path | None = None) -> subprocess.Popen:
    """Start ``argv`` from ``cwd`` (the repository root), output to ``log_path``, in its own group."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(argv, cwd=cwd or REPO, env=env or child_env(),
                                stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_served(proc: subprocess.Popen, url: str, deadline: float, what: str, log,
                headers: dict | None = None) -> requests.Response:
    """GET ``url`` until it answers 200; ``DoorStartError`` with ``log()`` if ``proc`` exits
    first or ``deadline`` (``time.monotonic()``) passes."""
    while True:
        if proc.poll() is not None:
            raise DoorStartError(f"{what} exited with {proc.returncode} before serving "
                                 f"{url}:\n{log()}")
        try:
            response = http_get(url, headers, timeout=POLL_TIMEOUT)
        except requests.RequestException:
            response = None
        if response is not None and response.status_code == 200:
            return response
        if time.monotonic() > deadline:
            raise DoorStartError(f"{what} did not serve {url} before the deadline:\n" + log())
        # Pace the poll on the process itself: returns at once if the server dies.
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)


def wait_for_card(door: DoorProcess, deadline: float) -> dict:
    """Poll the card until it is served; fail with the server's output past ``deadline``."""
    return wait_served(door.proc, door.card_url, deadline, "the door", door.log).json()


def session_id_of(card: dict) -> str | None:
    """The capsule extension's sessionId (public cards of a door without authentication)."""
    for ext in card.get("capabilities", {}).get("extensions", []):
        if ext.get("uri") == CAPSULE_URI:
            return ext.get("params", {}).get("sessionId")
    return None


def _base_dir(where) -> Path:
    if isinstance(where, pytest.TempPathFactory):
        return where.mktemp("door")
    return Path(where)


def launch(where, manifest: dict | None = None, *, host: str = "127.0.0.1",
           cwd: Path | None = None, env: dict | None = None,
           gunicorn_conf: str | None = None) -> DoorProcess:
    """Start a door (working directory ``cwd``, default the repository root) and wait for
    its card; the caller must ``stop()`` it.

    ``env`` adds variables to the server's environment (e.g. ``GUNICORN_CMD_ARGS``);
    ``gunicorn_conf`` is passed as ``--gunicorn-conf``.
    """
    directory = _base_dir(where)
    manifest = dict(default_manifest() if manifest is None else manifest)
    last_error = None
    for attempt in range(PORT_ATTEMPTS):
        port = free_port(host)
        network = dict(manifest.get("network") or {})
        network["internal_port"] = port
        manifest["network"] = network
        manifest_path = write_manifest(directory, manifest, f"murmur-{port}.yaml")
        log_path = directory / f"door-{port}.log"
        home = directory / f"home-{port}"        # running record and trace, not in ~
        argv = serve_argv(manifest_path, f"{host}:{port}")
        if gunicorn_conf is not None:
            argv += ["--gunicorn-conf", gunicorn_conf]
        proc = spawn(argv, log_path,
                     child_env(MURMUR_WSGI_HOME=str(home), **(env or {})), cwd=cwd)
        door = DoorProcess(url=f"http://{host}:{port}", manifest_path=manifest_path, proc=proc,
                           log_path=log_path, home=home)
        try:
            door.card = wait_for_card(door, time.monotonic() + START_DEADLINE)
        except DoorStartError as ex:
            door.stop(timeout=10)
            if ("Address already in use" in door.log() or " is in use; " in door.log()) \
                    and attempt + 1 < PORT_ATTEMPTS:
                last_error = ex
                continue
            raise
        except BaseException:
            door.stop(timeout=10)
            raise
        door.session_id = session_id_of(door.card)
        return door
    raise last_error  # pragma: no cover - the loop returns or raises


@contextlib.contextmanager
def start_door(where, manifest: dict | None = None, *, host: str = "127.0.0.1",
               cwd: Path | None = None, env: dict | None = None):
    """Serve ``manifest`` (default: conf/murmur.yaml's) as a real process; yield a DoorProcess.

    ``where`` is a directory (``tmp_path``) or a ``TempPathFactory``; the
    manifest, written as YAML, and the server's log go there. ``cwd`` is the door's
    working directory, which ``exports.files.root`` is relative to (default: the repository).
    Leaving the block sends SIGTERM and goes on: ``stopping`` checks that the door stops
    (``door.stop()`` inside the block waits for it).
    """
    door = launch(where, manifest, host=host, cwd=cwd, env=env)
    try:
        yield door
    finally:
        door.stop_soon()


@pytest.fixture(scope="module")
def door_server(tmp_path_factory):
    """One door per test module, serving conf/murmur.yaml's content on a free port."""
    with start_door(tmp_path_factory) as door:
        yield door


NO_BODY_WARNING = "WSGI app sent body bytes on a no-body response"


def head_as_get(url: str, then: str, headers: dict) -> tuple[requests.Response,
                                                             requests.Response]:
    """``(HEAD url, GET url)`` on one kept-alive connection, then a GET of ``then`` on it:
    whatever the server logged of the HEAD is in its log once that last answer is read."""
    with requests.Session() as session:
        head = session.head(url, headers=headers, timeout=10)
        get = session.get(url, headers=headers, timeout=10)
        session.get(then, headers=headers, timeout=10)
    return head, get
