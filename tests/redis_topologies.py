"""Real Redis topologies beyond one server, for the hub's tests: a Cluster (a Sentinel set:
tests/redis_sentinels.py, on this module's processes and waits).

- ``Cluster(directory).start()``: three primaries (``redis-server --cluster-enabled
  yes`` on free loopback ports), joined by ``redis-cli --cluster create``, and waited
  for until every node reports ``cluster_state:ok`` (``replicas=1``: and a replica of
  each, in sync). ``url`` is the
  ``redis-cluster://HOST:PORT,…`` form the hub's ``store`` setting takes; ``password``
  (and ``username``: an ACL user, the default user off) and ``tls`` (an Authority of
  tests/tls_util.py: ``rediss-cluster://…?ssl_ca_certs=…``, the bus on TLS too) secure it.

Every process is started with ``child_setup()`` (it dies with a killed suite) and every
wait has a deadline, paced on the processes themselves; nothing sleeps. A primary sends a
replica's full sync at once (``repl-diskless-sync-delay 0``; redis-server waits 5 s by
default for more replicas to share it): the set's replica, and one that rejoins.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import redis


from murmur_wsgi.groups import child_setup
from tests.process_util import stopping
from tests.redis_util import MISSING, free_port

DEADLINE = 20.0


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(MISSING, pytrace=False)
    return found


def _spawn(directory: Path, name: str, argv: list[str]) -> subprocess.Popen:
    log = open(directory / f"{name}.log", "wb")
    try:
        # NOTE: an environment of its own: spawned from a thread (a cluster started as the
        # session begins), a child made with vfork() that execs with the process's own
        # environ can find it reallocated by a test's os.environ change meanwhile (EFAULT).
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=child_setup(), env=dict(os.environ))
    finally:
        log.close()


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def wait_until(predicate, what: str, procs, deadline: float = DEADLINE):
    """Call ``predicate`` until it returns a true value; fail after ``deadline`` seconds.

    Paced on the processes: each round waits up to 20 ms on the first one's exit, so
    a process that dies at start fails at once with its log's name.
    """
    end = time.monotonic() + deadline
    while True:
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args[0]} exited while waiting for {what}")
        try:
            value = predicate()
        except redis.RedisError:
            value = None
        if value:
            return value
        assert time.monotonic() < end, f"Redis did not reach {what} within {deadline} s"
        try:
            procs[0].wait(timeout=0.02)
        except subprocess.TimeoutExpired:
            pass


class _Node:
    auth: dict = {}             # redis-py's password (and username) the test's clients give

    def __init__(self, directory: Path, port: int, extra: list[str], auth: dict | None = None):
        self.port = port
        self.auth = dict(auth or {})
        self.proc = _spawn(directory, f"redis-{port}", [
            _binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(directory),
            "--daemonize", "no", "--repl-diskless-sync-delay", "0", *extra])

    def client(self, **kwargs) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1,
                           decode_responses=True, **{**self.auth, **kwargs})


def cluster_port() -> int:
    """A free port whose cluster bus port (the port + 10000) is free and valid too."""
    return free_port(also=10000)


class Cluster:
    """Three primaries, each owning a third of the 16384 slots; no replicas, or
    ``replicas`` of each (``nodes``: the primaries first, as ``redis-cli`` assigns them)."""

    def __init__(self, directory: Path, size: int = 3, replicas: int = 0,
                 password: str | None = None, username: str | None = None, tls=None,
                 tls_host: str | None = None):
        # ``size`` 1: one primary owning every slot (redis-cli joins 3 at least), whose
        # port is chosen now (``url`` names it before it starts).
        self.port = cluster_port() if size == 1 else None
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.size = size
        self.replicas = replicas
        self.nodes: list[_Node] = []
        # Every node's requirepass, or (``username``) an ACL user's, the default user off.
        self.auth = {k: v for k, v in (("username", username), ("password", password)) if v}
        self.tls = tls          # a tests.tls_util.Authority: every node on TLS only, its bus too
        self.tls_host = tls_host    # the only name the nodes' certificates are for

    @property
    def url(self) -> str:
        auth = ":".join(quote(self.auth.get(k, ""), safe="") for k in ("username", "password"))
        scheme = "rediss-cluster" if self.tls else "redis-cluster"
        query = f"?ssl_ca_certs={quote(self.tls.ca_file)}" if self.tls else ""
        ports = [n.port for n in self.nodes] or [self.port]
        return f"{scheme}://" + (auth + "@" if self.auth else "") + \
            ",".join(f"127.0.0.1:{port}" for port in ports) + query

    def _tls_options(self, port: int) -> list[str]:
        if self.tls is None:
            return []
        return [*self.tls.server_options(port, self.tls_host), "--tls-cluster", "yes",
                "--tls-replication", "yes"]

    def _client_auth(self) -> dict:
        if self.tls is None:
            return dict(self.auth)
        return {**self.auth, "ssl": True, "ssl_ca_certs": self.tls.ca_file,
                **({"ssl_check_hostname": False} if self.tls_host else {})}

    def _secured(self) -> tuple[list[str], list[str]]:
        """The nodes' options and redis-cli's for ``auth``."""
        if "username" in self.auth:
            user, password = self.auth["username"], self.auth["password"]
            return (["--user", "default", "off", "--user", user, "on", f">{password}", "~*",
                     "&*", "+@all", "--masteruser", user, "--masterauth", password],
                    ["--user", user, "--pass", password])
        if "password" in self.auth:
            password = self.auth["password"]
            return ["--requirepass", password, "--masterauth", password], ["-a", password]
        return [], []

    def start(self) -> Cluster:
        options, cli_auth = self._secured()
        for _ in range(self.size * (1 + self.replicas)):
            port = self.port or cluster_port()
            self.nodes.append(_Node(self.directory, port, [
                "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
                "--cluster-node-timeout", "2000", *options, *self._tls_options(port)],
                self._client_auth()))
        procs = [n.proc for n in self.nodes]
        for node in self.nodes:
            wait_until(lambda node=node: node.client().ping(), f"PING on {node.port}", procs)
        if self.size == 1:
            self.nodes[0].client().execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        else:
            self._create(cli_auth)
        for node in self.nodes:
            wait_until(lambda node=node: "cluster_state:ok" in node.client().execute_command(
                "CLUSTER", "INFO"), f"cluster_state:ok on {node.port}", procs)
        for node in self.nodes[self.size:]:
            wait_until(lambda node=node: node.client().info("replication").get(
                "master_link_status") == "up", f"the replica {node.port}'s link", procs)
        return self

    def _create(self, cli_auth: list[str]) -> None:
        create = subprocess.run(
            [_binary("redis-cli"), *cli_auth, "--no-auth-warning",
             *(["--tls", "--cacert", self.tls.ca_file] if self.tls else []), "--cluster", "create",
             *[f"127.0.0.1:{n.port}" for n in self.nodes], "--cluster-replicas",
             str(self.replicas), "--cluster-yes"],
            capture_output=True, text=True, timeout=DEADLINE)
        assert create.returncode == 0, create.stdout + create.stderr

    def replica_of(self, primary: _Node) -> _Node:
        """A replica of ``primary`` (a cluster started with ``replicas``)."""
        for node in self.nodes[self.size:]:
            if node.client().info("replication").get("master_port") == primary.port:
                return node
        raise LookupError(f"no replica of {primary.port}")

    def client(self) -> redis.RedisCluster:
        return redis.RedisCluster(host="127.0.0.1", port=self.nodes[0].port,
                                  decode_responses=True, **self._client_auth())

    def flush(self) -> None:
        stopping.join(self.url)     # no server still stopping writes once it is flushed
        for node in self.nodes:
            client = node.client()
            try:
                client.flushall()
            finally:
                client.close()

    def stop(self) -> None:
        stopping.join(self.url)
        for node in self.nodes:
            _stop(node.proc)
        self.nodes = []
