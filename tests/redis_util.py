"""A real ``redis-server`` for the hub's tests: on a free loopback port, no persistence.

``RedisServer(directory).start()`` runs ``redis-server --port P --bind 127.0.0.1
--unixsocket DIRECTORY/redis-P.sock --save "" --appendonly no --dir DIRECTORY`` and waits
(with a deadline) until it answers PING (``url`` over TCP, ``unix_url`` on the socket);
``stop()`` ends it. ``tls`` (a ``tests.tls_util.Authority``): on TLS only (``--port 0
--tls-port P``, a certificate the authority issued; ``tls_url`` is ``rediss://`` without
its CA); ``auth``: redis-py's ``username``/``password`` the fixture's own clients log in
with (the server's ``extra`` sets them: ``--requirepass``, ``--user``). The fixture ``redis_server`` (tests/conftest.py) starts one per
session. Missing ``redis-server`` fails the test with what to
install: ``make test`` installs it (tests/ensure_redis.sh); it is never skipped.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis

from murmur_wsgi.groups import child_setup
from murmur_wsgi.hub.config_store_url import SOCKET_PATH_BYTES
from tests.ports import free_port
from tests.process_util import stopping

START_DEADLINE = 10.0
MISSING = ("redis-server is not installed: the hub's Redis tests need it. `make test` "
           "installs it as root with apt-get; otherwise install it (Debian/Ubuntu: "
           "apt-get install -y redis-server; macOS: brew install redis) and run again.")


class RedisServer:
    def __init__(self, directory: Path, port: int | None = None, persist: bool = False,
                 extra: tuple = (), tls=None, auth: dict | None = None):
        self.directory = Path(directory)
        self.port = port or free_port()
        self.persist = persist          # an append-only file, fsynced on every write
        self.extra = tuple(extra)       # more of redis-server's options
        self.proc: subprocess.Popen | None = None
        self.tls = tls                  # its Authority: TLS only, on ``port``
        self.auth = dict(auth or {})

    def _options(self) -> list[str]:
        if self.tls is None:
            return ["--port", str(self.port)]
        return self.tls.server_options(self.port)

    def _client_kwargs(self) -> dict:
        kwargs = dict(self.auth, port=self.port)
        if self.tls is not None:
            kwargs.update(ssl=True, ssl_ca_certs=self.tls.ca_file)
        return kwargs

    @property
    def tls_url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def socket_path(self) -> Path:
        """Its unix socket: in its directory, or in /tmp when that path would be too long."""
        path = self.directory / f"redis-{self.port}.sock"
        if len(os.fsencode(path)) > SOCKET_PATH_BYTES:
            path = Path("/tmp") / f"murmur-redis-{self.port}.sock"
        return path

    def socket_url(self, db: int = 0) -> str:
        """The same server on its unix socket (``store: unix://…``), database ``db``."""
        return f"unix://{self.socket_path}?db={db}"

    @property
    def unix_url(self) -> str:
        return self.socket_url()

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail(MISSING, pytrace=False)
        self.directory.mkdir(parents=True, exist_ok=True)
        log = open(self.directory / f"redis-{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [binary, *self._options(), "--bind", "127.0.0.1",
             "--unixsocket", str(self.socket_path), "--unixsocketperm", "700", "--save", "",
             "--appendonly", "yes" if self.persist else "no", "--appendfsync", "always",
             "--dir", str(self.directory), "--daemonize", "no", *self.extra],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=child_setup(),   # dies with a killed suite
            env=dict(os.environ))       # its own: see redis_topologies._spawn
        log.close()
        client = redis.Redis(socket_timeout=0.5, socket_connect_timeout=0.5,
                             **self._client_kwargs())
        deadline = time.monotonic() + START_DEADLINE
        try:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError("redis-server exited at start: "
                                       + (self.directory / f"redis-{self.port}.log").read_text())
                try:
                    if client.ping():
                        return self
                except redis.RedisError:
                    pass
                assert time.monotonic() < deadline, "redis-server did not answer in time"
                try:
                    self.proc.wait(timeout=0.02)     # paced on the process itself
                except subprocess.TimeoutExpired:
                    pass
        finally:
            client.close()

    def client(self) -> redis.Redis:
        return redis.Redis(decode_responses=True, **self._client_kwargs())

    def flush(self) -> None:
        stopping.join(self.url)     # no server still stopping writes once it is flushed
        client = self.client()
        try:
            client.flushall()
        finally:
            client.close()

    def stop_soon(self) -> None:
        """``stop`` on a thread, once the servers on it stopped (``stopping.after``)."""
        stopping.after(self.url, self.stop)

    def stop(self) -> None:
        stopping.join(self.url)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None
