"""Real Redis topologies beyond one server, for the hub's tests: a Cluster and a Sentinel set.

- ``Cluster(directory).start()``: three primaries (``redis-server --cluster-enabled
  yes`` on free loopback ports), joined by ``redis-cli --cluster create``, and waited
  for until every node reports ``cluster_state:ok`` (``replicas=1``: and a replica of
  each, in sync). ``url`` is the
  ``redis-cluster://HOST:PORT,…`` form the hub's ``store`` setting takes.
- ``SentinelSet(directory).start()``: a primary, one replica of it, and three
  sentinels (``redis-server FILE --sentinel``) watching it under ``SERVICE``, each told
  of the replica and of the others in its file; waited for until every sentinel is
  connected to the replica and to the other sentinels, and the replica acknowledges
  writes (a ``WAIT`` counts it). ``url`` is the
  ``redis-sentinel://HOST:PORT,…/SERVICE/0`` form. ``kill_primary()`` SIGKILLs the
  primary, ``wait_failover()`` waits until the sentinels name the replica and it is a primary,
  ``rejoin()`` starts the killed one again as the new primary's replica (acknowledging).
  ``down_after_ms`` is the sentinels' ``down-after-milliseconds`` (1000); ``quick``
  starts them in a quarter of a second instead of a second (see ``start``).

Every process is started with ``child_setup()`` (it dies with a killed suite) and every
wait has a deadline, paced on the processes themselves; nothing sleeps. A primary sends a
replica's full sync at once (``repl-diskless-sync-delay 0``; redis-server waits 5 s by
default for more replicas to share it): the set's replica, and one that rejoins.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from redis.sentinel import Sentinel

from murmur_wsgi.groups import child_setup
from tests.process_util import stopping
from tests.redis_util import MISSING, free_port

DEADLINE = 20.0
SERVICE = "murmur"
PING_PERIOD_MS = 1000           # a sentinel's (redis-server's SENTINEL_PING_PERIOD)
# NOTE: a Sentinel set's nodes sync a replica through a file: one synced without a disk is
# sent nothing (a WAIT's GETACK neither) until its first REPLCONF ACK, up to a second later.
DISK_SYNC = ["--repl-diskless-sync", "no"]


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
    while True:
        port = free_port()
        if port + 10000 <= 65535:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            return port


class Cluster:
    """Three primaries, each owning a third of the 16384 slots; no replicas, or
    ``replicas`` of each (``nodes``: the primaries first, as ``redis-cli`` assigns them)."""

    def __init__(self, directory: Path, size: int = 3, replicas: int = 0,
                 password: str | None = None, username: str | None = None):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.size = size
        self.replicas = replicas
        self.nodes: list[_Node] = []
        # Every node's requirepass, or (``username``) an ACL user's, the default user off.
        self.auth = {k: v for k, v in (("username", username), ("password", password)) if v}

    @property
    def url(self) -> str:
        auth = ":".join(quote(self.auth.get(k, ""), safe="") for k in ("username", "password"))
        return "redis-cluster://" + (auth + "@" if self.auth else "") + \
            ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

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
            port = cluster_port()
            self.nodes.append(_Node(self.directory, port, [
                "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
                "--cluster-node-timeout", "2000", *options], self.auth))
        procs = [n.proc for n in self.nodes]
        for node in self.nodes:
            wait_until(lambda node=node: node.client().ping(), f"PING on {node.port}", procs)
        create = subprocess.run(
            [_binary("redis-cli"), *cli_auth, "--no-auth-warning", "--cluster", "create",
             *[f"127.0.0.1:{n.port}" for n in self.nodes], "--cluster-replicas",
             str(self.replicas), "--cluster-yes"],
            capture_output=True, text=True, timeout=DEADLINE)
        assert create.returncode == 0, create.stdout + create.stderr
        for node in self.nodes:
            wait_until(lambda node=node: "cluster_state:ok" in node.client().execute_command(
                "CLUSTER", "INFO"), f"cluster_state:ok on {node.port}", procs)
        for node in self.nodes[self.size:]:
            wait_until(lambda node=node: node.client().info("replication").get(
                "master_link_status") == "up", f"the replica {node.port}'s link", procs)
        return self

    def replica_of(self, primary: _Node) -> _Node:
        """A replica of ``primary`` (a cluster started with ``replicas``)."""
        for node in self.nodes[self.size:]:
            if node.client().info("replication").get("master_port") == primary.port:
                return node
        raise LookupError(f"no replica of {primary.port}")

    def client(self) -> redis.RedisCluster:
        return redis.RedisCluster(host="127.0.0.1", port=self.nodes[0].port,
                                  decode_responses=True, **self.auth)

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


def _fields(reply) -> dict:
    """A SENTINEL reply's fields: a mapping (RESP3) or a flat list of names and values."""
    return dict(zip(reply[::2], reply[1::2])) if isinstance(reply, list) else reply


class SentinelSet:
    """A primary, one replica, three sentinels watching the primary as ``SERVICE``."""

    def __init__(self, directory: Path, sentinels: int = 3, down_after_ms: int = 1000,
                 quick: bool = False, password: str | None = None,
                 sentinel_password: str | None = None):
        self.password = password                    # the primary's and replica's requirepass
        self.sentinel_password = sentinel_password  # the sentinels' own requirepass
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.count = sentinels
        self.down_after_ms = down_after_ms
        self.quick = quick
        self.primary: _Node | None = None
        self.replica: _Node | None = None
        self.sentinels: list[_Node] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        query = f"?sentinel_password={quote(self.sentinel_password, safe='')}" \
            if self.sentinel_password else ""
        return f"redis-sentinel://{auth}{hosts}/{SERVICE}/0{query}"

    def _data_node(self, extra: list[str], port: int | None = None) -> _Node:
        """The primary or a replica: its password asked, and given to its primary."""
        if self.password:
            extra = [*extra, "--requirepass", self.password, "--masterauth", self.password]
        return _Node(self.directory, port or free_port(), [*DISK_SYNC, *extra],
                     {"password": self.password} if self.password else None)

    def _procs(self) -> list[subprocess.Popen]:
        nodes = [self.primary, self.replica, *self.sentinels]
        return [n.proc for n in nodes if n is not None and n.proc.poll() is None] or \
            [n.proc for n in nodes if n is not None]

    def start(self) -> SentinelSet:
        self.primary = self._data_node([])
        wait_until(lambda: self.primary.client().ping(), "the primary's PING", self._procs())
        self.replica = self._data_node(["--replicaof", "127.0.0.1", str(self.primary.port)])
        self._wait_link(self.replica)
        # NOTE: each sentinel's file names the others and the replica, as a sentinel writes
        # them there itself once it heard of them: hello messages (every 2 s) would tell it.
        ports = [free_port() for _ in range(self.count)]
        ids = {port: os.urandom(20).hex() for port in ports}
        for port in ports:
            conf = self.directory / f"sentinel-{port}.conf"
            known = "".join(f"sentinel known-sentinel {SERVICE} 127.0.0.1 {other} {ids[other]}\n"
                            for other in ports if other != port)
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.directory}\n"
                f"sentinel myid {ids[port]}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}\n"
                f"sentinel failover-timeout {SERVICE} 5000\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
                f"sentinel known-replica {SERVICE} 127.0.0.1 {self.replica.port}\n" + known
                + (f"sentinel auth-pass {SERVICE} {self.password}\n" if self.password else "")
                # NOTE: a sentinel gives its requirepass to the other sentinels too.
                + (f"requirepass {self.sentinel_password}\n" if self.sentinel_password else ""))
            node = _Node.__new__(_Node)
            node.port = port
            node.auth = {"password": self.sentinel_password} if self.sentinel_password else {}
            node.proc = _spawn(self.directory, f"sentinel-{port}",
                               [_binary("redis-server"), str(conf), "--sentinel"])
            self.sentinels.append(node)
        if self.quick:
            # NOTE: a sentinel started before the others found them closed and tries again a
            # ping period later (a second); a tenth of that until each sees the set, then its
            # own again (which judges, at a failover, which replica's link is fresh enough).
            for node in self.sentinels:
                wait_until(lambda node=node: node.client().ping(), f"sentinel {node.port}'s PING",
                           self._procs())
                self._ping_period(node, PING_PERIOD_MS // 10)
        for node in self.sentinels:
            wait_until(lambda node=node: self._sentinel_ready(node),
                       f"sentinel {node.port} seeing the set", self._procs())
        if self.quick:
            for node in self.sentinels:
                self._ping_period(node, PING_PERIOD_MS)
        self._wait_acknowledged(self.primary, self.replica)
        return self

    @staticmethod
    def _ping_period(node: _Node, milliseconds: int) -> None:
        client = node.client()
        try:
            client.execute_command("SENTINEL", "DEBUG", "ping-period", milliseconds)
        finally:
            client.close()

    def _sentinel_ready(self, node: _Node) -> bool:
        client = node.client()
        try:
            fields = _fields(client.execute_command("SENTINEL", "MASTER", SERVICE))
            if not (int(fields.get("num-slaves", 0)) >= 1
                    and int(fields.get("num-other-sentinels", 0)) >= self.count - 1):
                return False
            # Connected to each of them: a flag "disconnected" until its link is up.
            peers = [*client.execute_command("SENTINEL", "SENTINELS", SERVICE),
                     *client.execute_command("SENTINEL", "REPLICAS", SERVICE)]
            return all("disconnected" not in _fields(peer).get("flags", "disconnected")
                       for peer in peers)
        finally:
            client.close()

    def primary_port(self) -> int | None:
        """The port the sentinels name as the primary now (the first sentinel's word)."""
        return self._names(self.sentinels[0])

    def kill_primary(self) -> None:
        self.primary.proc.send_signal(signal.SIGKILL)
        self.primary.proc.wait(timeout=5)

    def wait_failover(self, deadline: float = DEADLINE) -> int:
        """Wait until the sentinels name the replica as the primary; its port."""
        old = self.primary.port
        port = wait_until(lambda: (port := self.primary_port()) != old and port,
                          "a failover", self._procs(), deadline)
        node = self.replica
        wait_until(lambda: node.client().info("replication")["role"] == "master",
                   "the replica's promotion", self._procs(), deadline)
        watchers = self.watchers()
        wait_until(lambda: watchers.discover_master(SERVICE) == ("127.0.0.1", port),
                   "the sentinels naming the new primary", self._procs(), deadline)
        # NOTE: and every sentinel: one still naming the old address would send a client
        # there once ``rejoin`` starts it again, as a replica.
        wait_until(lambda: all(self._names(sentinel) == port for sentinel in self.sentinels),
                   "every sentinel naming the new primary", self._procs(), deadline)
        return port

    @staticmethod
    def _names(sentinel) -> int | None:
        """The primary's port ``sentinel`` names now (None when it cannot say)."""
        client = sentinel.client()
        try:
            _, port = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
            return int(port)
        except Exception:  # noqa: BLE001 - a sentinel that cannot answer names none
            return None
        finally:
            client.close()

    def rejoin(self) -> None:
        """After ``wait_failover``: the killed primary started again on its port (empty) as
        the new primary's replica, in sync; ``primary`` and ``replica`` swap."""
        old, promoted = self.primary, self.replica
        node = self._data_node(["--replicaof", "127.0.0.1", str(promoted.port)], old.port)
        self.primary, self.replica = promoted, node
        self._wait_link(node)
        self._wait_acknowledged(promoted, node)

    def _wait_link(self, replica: _Node) -> None:
        wait_until(lambda: replica.client().info("replication").get(
            "master_link_status") == "up", f"the replica {replica.port}'s link", self._procs())

    def _wait_acknowledged(self, primary: _Node, replica: _Node) -> None:
        """Until ``primary`` hears ``replica`` acknowledge a write (a WAIT counts it)."""
        def acknowledged() -> bool:
            client = primary.client(single_connection_client=True)
            try:
                client.publish("redis-topologies:ready", "")     # replicated, and no key
                return client.execute_command("WAIT", 1, 100) >= 1
            finally:
                client.close()
        wait_until(acknowledged, f"the replica {replica.port} acknowledging", self._procs())

    def watchers(self) -> Sentinel:
        """redis-py's client of the sentinels."""
        return Sentinel([("127.0.0.1", s.port) for s in self.sentinels], socket_timeout=0.5,
                        sentinel_kwargs={"socket_timeout": 0.5,
                                         "password": self.sentinel_password},
                        password=self.password)

    def stop_soon(self) -> None:
        """``stop`` on a thread, once the servers on it stopped (``stopping.after``)."""
        stopping.after(self.url, self.stop)

    def stop(self) -> None:
        stopping.join(self.url)     # no server still stopping writes once it is stopped
        nodes = [node for node in (*self.sentinels, self.replica, self.primary) if node is not None]
        for node in nodes:              # SIGTERM to each first: they stop together
            if node.proc.poll() is None:
                node.proc.terminate()
        for node in nodes:
            _stop(node.proc)
        self.sentinels, self.replica, self.primary = [], None, None
