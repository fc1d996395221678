"""A real Sentinel set for the hub's tests (processes and waits of tests/redis_topologies.py).

``SentinelSet(directory).start()``: a primary, one replica of it, and three
sentinels (``redis-server FILE --sentinel``) watching it under ``SERVICE``, each told
of the replica and of the others in its file; waited for until every sentinel is
connected to the replica and to the other sentinels, and the replica acknowledges
writes (a ``WAIT`` counts it). ``url`` is the
``redis-sentinel://HOST:PORT,…/SERVICE/0`` form. ``kill_primary()`` SIGKILLs the
primary, ``wait_failover()`` waits until the sentinels name the replica and it is a primary,
``rejoin()`` starts the killed one again as the new primary's replica (acknowledging).
``down_after_ms`` is the sentinels' ``down-after-milliseconds`` (1000); ``quick``
starts them in a quarter of a second instead of a second (see ``start``). ``password``:
the primary's and replica's ``requirepass`` (the URL's userinfo); ``sentinel_password``:
the sentinels' own (the URL's ``sentinel_password=``). ``tls`` (an Authority of
tests/tls_util.py): every node and sentinel on TLS only, replication and the sentinels'
own links too; ``url`` is then ``rediss-sentinel://…?ssl_ca_certs=…``. ``tls_host``: the
only name their certificates are for (not the 127.0.0.1 they are reached at);
``node_tls_host``: the same for the primary's and the replica's only;
``mutual``: each asks a client certificate (``tls-auth-clients yes``), ``client_cert`` the
``(cert, key)`` files of one the authority issued.
"""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from urllib.parse import quote

from redis.sentinel import Sentinel

from tests.process_util import stopping
from tests.redis_topologies import DEADLINE, _binary, _Node, _spawn, _stop, wait_until
from tests.redis_util import free_port

SERVICE = "murmur"
PING_PERIOD_MS = 1000           # a sentinel's (redis-server's SENTINEL_PING_PERIOD)
# NOTE: a Sentinel set's nodes sync a replica through a file: one synced without a disk is
# sent nothing (a WAIT's GETACK neither) until its first REPLCONF ACK, up to a second later.
DISK_SYNC = ["--repl-diskless-sync", "no"]


def _fields(reply) -> dict:
    """A SENTINEL reply's fields: a mapping (RESP3) or a flat list of names and values."""
    return dict(zip(reply[::2], reply[1::2])) if isinstance(reply, list) else reply


class SentinelSet:
    """A primary, one replica (``replicas``: more), three sentinels watching the primary as
    ``SERVICE``."""

    def __init__(self, directory: Path, sentinels: int = 3, down_after_ms: int = 1000,
                 quick: bool = False, password: str | None = None,
                 sentinel_password: str | None = None, tls=None, tls_host: str | None = None,
                 node_tls_host: str | None = None,
                 mutual: bool = False, replicas: int = 1):
        self.tls = tls                              # a tests.tls_util.Authority: TLS only
        self.tls_host = tls_host                    # the only name the certificates are for
        self.node_tls_host = node_tls_host or tls_host      # the primary's and replica's
        self.mutual = mutual                        # a client certificate asked
        self.client_cert = tls.issue("hub") if mutual else None
        self.password = password                    # the primary's and replica's requirepass
        self.sentinel_password = sentinel_password  # the sentinels' own requirepass
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.count = sentinels
        self.down_after_ms = down_after_ms
        self.quick = quick
        self.primary: _Node | None = None
        self.replica: _Node | None = None
        self.replicas = replicas
        self.others: list[_Node] = []               # the replicas past the first
        self.sentinels: list[_Node] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        fields = [f"sentinel_password={quote(self.sentinel_password, safe='')}"] \
            if self.sentinel_password else []
        if self.tls:
            fields.append(f"ssl_ca_certs={quote(self.tls.ca_file)}")
        query = "?" + "&".join(fields) if fields else ""
        scheme = "rediss-sentinel" if self.tls else "redis-sentinel"
        return f"{scheme}://{auth}{hosts}/{SERVICE}/0{query}"

    @property
    def _client_tls(self) -> dict:
        """redis-py's settings of a client of the set's nodes (TLS, verified)."""
        if self.tls is None:
            return {}
        cert, key = self.client_cert or (None, None)
        unchecked = {"ssl_check_hostname": False} if self.node_tls_host else {}
        return {"ssl": True, "ssl_ca_certs": self.tls.ca_file, "ssl_certfile": cert,
                "ssl_keyfile": key, **unchecked}

    def _tls_options(self, port: int, host: str | None) -> list[str]:
        """A node's or sentinel's options: TLS only on ``port``, its own links too."""
        if self.tls is None:
            return []
        return [*self.tls.server_options(port, host,
                                         "yes" if self.mutual else "optional"),
                "--tls-replication", "yes"]

    def _data_node(self, extra: list[str], port: int | None = None) -> _Node:
        """The primary or a replica: its password asked, and given to its primary."""
        if self.password:
            extra = [*extra, "--requirepass", self.password, "--masterauth", self.password]
        port = port or free_port()
        return _Node(self.directory, port, [*DISK_SYNC, *extra, *self._tls_options(port, self.node_tls_host)],
                     {**({"password": self.password} if self.password else {}),
                      **self._client_tls})

    def _procs(self) -> list[subprocess.Popen]:
        nodes = [self.primary, self.replica, *self.others, *self.sentinels]
        return [n.proc for n in nodes if n is not None and n.proc.poll() is None] or \
            [n.proc for n in nodes if n is not None]

    def start(self) -> SentinelSet:
        self.primary = self._data_node([])
        wait_until(lambda: self.primary.client().ping(), "the primary's PING", self._procs())
        self.replica = self._data_node(["--replicaof", "127.0.0.1", str(self.primary.port)])
        self._wait_link(self.replica)
        for _ in range(self.replicas - 1):
            other = self._data_node(["--replicaof", "127.0.0.1", str(self.primary.port)])
            self._wait_link(other)
            self.others.append(other)
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
                + "".join(f"sentinel known-replica {SERVICE} 127.0.0.1 {node.port}\n"
                          for node in (self.replica, *self.others)) + known
                + (f"sentinel auth-pass {SERVICE} {self.password}\n" if self.password else "")
                # NOTE: a sentinel gives its requirepass to the other sentinels too.
                + (f"requirepass {self.sentinel_password}\n" if self.sentinel_password else ""))
            node = _Node.__new__(_Node)
            node.port = port
            node.auth = {**({"password": self.sentinel_password} if self.sentinel_password
                            else {}), **self._client_tls}
            node.proc = _spawn(self.directory, f"sentinel-{port}",
                               [_binary("redis-server"), str(conf), "--sentinel",
                                *self._tls_options(port, self.tls_host)])
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
            if not (int(fields.get("num-slaves", 0)) >= self.replicas
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
                                         "password": self.sentinel_password,
                                         **self._client_tls},
                        password=self.password, **self._client_tls)

    def stop_soon(self) -> None:
        """``stop`` on a thread, once the servers on it stopped (``stopping.after``)."""
        stopping.after(self.url, self.stop)

    def stop(self) -> None:
        stopping.join(self.url)     # no server still stopping writes once it is stopped
        nodes = [node for node in (*self.sentinels, self.replica, *self.others, self.primary)
                 if node is not None]
        for node in nodes:              # SIGTERM to each first: they stop together
            if node.proc.poll() is None:
                node.proc.terminate()
        for node in nodes:
            _stop(node.proc)
        self.sentinels, self.replica, self.others, self.primary = [], None, [], None
