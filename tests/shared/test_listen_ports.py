"""A host the servers cannot bind is one line and exit 2 before anything starts.

``getaddrinfo`` takes ``*`` for the loopback addresses, where gunicorn's and Werkzeug's
bind to ``("*", port)`` fails: the check passed, and gunicorn then retried five times
and exited 1 ("Can't connect to ('*', PORT)"); with no port in the manifest, the door
picking a free one raised a traceback. The check now binds as the servers bind.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import yaml

from murmur_wsgi.cli import main
from murmur_wsgi.door.cli import _listen
from murmur_wsgi.door.manifest import load_manifest_file
from murmur_wsgi.serving.ports import free_port, listen_refusal

UNKNOWN = "Name or service not known"
UNREADABLE = {"\x00": "host name must not contain null character",
              "\u00e9" * 70: "encoding of hostname failed"}


def manifest_file(tmp_path, host: str, port: int = 0) -> str:
    path = tmp_path / "murmur.yaml"
    network = {"host": host, **({"internal_port": port} if port else {})}
    path.write_text(yaml.safe_dump({"name": "star", "version": "0.1.0", "agent": "demo",
                                    "network": network}))
    return str(path)


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
    assert main(["serve", "--config", manifest_file(tmp_path, "*")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"murmur-wsgi: network.host: '*': cannot listen there: {UNKNOWN}\n"


@pytest.mark.parametrize("host", list(UNREADABLE), ids=["nul", "long-label"])
@pytest.mark.parametrize("port", [0, 41999], ids=["no-port", "port"])
def test_a_host_the_socket_cannot_read_is_one_line(tmp_path, capsys, host, port):
    # NOTE: the socket raises TypeError for these, which the check let through: a traceback.
    assert main(["serve", "--config", manifest_file(tmp_path, host, port)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith("murmur-wsgi: ") and err.endswith(f": {UNREADABLE[host]}\n"), err


def test_a_bracketed_ipv6_host_with_no_port_gets_one(tmp_path):
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    # NOTE: before, the brackets went to the bind when the door chose the port.
    listen = _listen(load_manifest_file(manifest_file(tmp_path, "[::1]")), None)
    assert listen.startswith("[::1]:") and listen_refusal(listen) is None


@pytest.mark.parametrize("host, why", [("*", UNKNOWN), *UNREADABLE.items()],
                         ids=["star", "nul", "long-label"])
def test_the_hub_on_a_host_it_cannot_bind_is_one_line(tmp_path, capsys, host, why):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"public_url": "http://127.0.0.1:41880"}))
    assert main(["hub", "--config", str(path), "--listen", f"{host}:41880"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith("murmur-wsgi: ") and err.endswith(f": cannot listen there: {why}\n")


@pytest.mark.parametrize("conf", ["missing.conf.py", "."], ids=["missing", "a-directory"])
def test_a_gunicorn_conf_that_is_not_a_file_is_one_line(tmp_path, conf):
    # NOTE: a child process: were the check missing, serve would exec gunicorn.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = str(tmp_path / conf)
    done = subprocess.run([sys.executable, "-m", "murmur_wsgi.cli", "serve", "--config",
                           manifest_file(tmp_path, "127.0.0.1", port), "--gunicorn-conf",
                           path], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MURMUR_WSGI_HOME": str(tmp_path)})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"murmur-wsgi: --gunicorn-conf: {path}: is not a file\n"


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "127.0.0.1:00", "localhost:0"])
def test_listen_on_port_0_names_the_port_it_will_serve_on(tmp_path, listen):
    # The card's URL and the running record are the listen address: port 0 is no address.
    manifest = load_manifest_file(manifest_file(tmp_path, "127.0.0.1", 41999))
    chosen = _listen(manifest, listen)
    host, _, port = chosen.rpartition(":")
    assert host == listen.rpartition(":")[0] and 0 < int(port) < 65536
    assert listen_refusal(chosen) is None
    assert _listen(manifest, "127.0.0.1:41873") == "127.0.0.1:41873"     # a port is kept
