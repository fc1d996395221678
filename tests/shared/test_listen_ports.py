"""A host the servers cannot bind is one line and exit 2 before anything starts.

``getaddrinfo`` takes ``*`` for the loopback addresses, where gunicorn's and Werkzeug's
bind to ``("*", port)`` fails: the check passed, and gunicorn then retried five times
and exited 1 ("Can't connect to ('*', PORT)"); with no port in the manifest, the door
picking a free one raised a traceback. The check now binds as the servers bind.
"""
from __future__ import annotations

import socket

import pytest
import yaml

from murmur_wsgi.cli import main
from murmur_wsgi.serving.ports import free_port, listen_refusal

UNKNOWN = "Name or service not known"


@pytest.mark.parametrize("host", ["*"])
def test_a_host_that_cannot_be_bound_is_refused(host):
    with socket.socket() as probe:          # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    refusal = listen_refusal(f"{host}:{port}")
    assert refusal is not None and refusal.startswith(f"{host}:{port}: cannot listen there: ")
    with pytest.raises(OSError):
        free_port(host)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]"])
def test_the_hosts_the_servers_bind_are_taken(host):
    if ":" in host and not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host.strip("[]"), 0))
        port = probe.getsockname()[1]
    assert listen_refusal(f"{host}:{port}") is None
    assert 0 < free_port(host.strip("[]")) < 65536


def test_the_door_on_a_host_it_cannot_bind_with_no_port_is_one_line(tmp_path, capsys):
    path = tmp_path / "murmur.yaml"
    path.write_text(yaml.safe_dump({"name": "star", "version": "0.1.0", "agent": "demo",
                                    "network": {"host": "*"}}))
    assert main(["serve", "--config", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"murmur-wsgi: network.host: '*': cannot listen there: {UNKNOWN}\n"


def test_the_hub_on_a_host_it_cannot_bind_is_one_line(tmp_path, capsys):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"public_url": "http://127.0.0.1:41880"}))
    assert main(["hub", "--config", str(path), "--listen", "*:41880"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"murmur-wsgi: *:41880: cannot listen there: {UNKNOWN}\n"
