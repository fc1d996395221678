"""``hub key`` on a Redis hub whose Redis does not answer: no key is lost."""
from __future__ import annotations

import socket

import yaml

from murmur_wsgi.cli import main
from murmur_wsgi.hub import cli as hub_cli

from tests.hub.conftest import sha

TEXT = "tenants:\n  t:\n    api_keys: []   # none yet\n    agents:\n      a: {agent: demo}\n"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_key_is_not_minted_while_redis_cannot_be_reached(tmp_path, capsys):
    """NOTE: before, hub.yaml got the new digest, then the Redis write failed and the
    command exited 2 without printing the key: a digest recorded for a key no one had."""
    path = tmp_path / "hub.yaml"
    path.write_text(f"store: redis://127.0.0.1:{closed_port()}/0\n" + TEXT)
    before = path.read_text()
    assert main(["hub", "key", "t", "--config", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and path.read_text() == before
    assert captured.err.startswith("murmur-wsgi: the hub's Redis cannot be reached "
                                   "(ConnectionError)") and captured.err.count("\n") == 1


def test_a_key_recorded_in_hub_yaml_is_printed_when_redis_fails_after(tmp_path, capsys,
                                                                       monkeypatch):
    """Redis answers the read before the change, then fails the write: the key is in
    hub.yaml (it works where that file is read), so it is printed, and the line says the
    other replicas do not have it."""
    class Flaky:
        def hgetall(self, name):
            return {}

        def hset(self, name, key, value):
            raise ConnectionError("gone")

    monkeypatch.setattr(hub_cli, "redis_client", lambda config: Flaky())
    path = tmp_path / "hub.yaml"
    path.write_text("store: redis://127.0.0.1:6379/0\n" + TEXT)
    assert main(["hub", "key", "t", "--config", str(path)]) == 2
    captured = capsys.readouterr()
    key = captured.out.strip()
    assert key.startswith("mhk_")
    assert yaml.safe_load(path.read_text())["tenants"]["t"]["api_keys"] == [sha(key)]
    assert "hub.yaml is changed, the other replicas are not" in captured.err


def test_hub_key_on_a_redis_cluster_that_cannot_be_reached_is_one_line(tmp_path, capsys):
    """A cluster's client reads the slot map as it is made: that failure is the same one
    line as a single Redis's, never a traceback."""
    path = tmp_path / "hub.yaml"
    path.write_text(f"store: redis-cluster://127.0.0.1:{closed_port()}\n" + TEXT)
    before = path.read_text()
    for args in (["t", "--list"], ["t"]):
        assert main(["hub", "key", *args, "--config", str(path)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and path.read_text() == before
        assert captured.err.startswith("murmur-wsgi: the hub's Redis cannot be reached (")
        assert captured.err.count("\n") == 1
