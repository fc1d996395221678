"""Each way of failing to get an answer is one line, one sentence naming the agent's address
once, exit 2: a closed port, an unsendable header, a redirect loop, TLS refused either way,
a silent server, an answer cut short.

Before, the CLI wrapped a failure the client had already worded around its address
(``the door at URL: the request to the door at URL failed: Exceeded 30 redirects.``), and
a TLS failure quoted urllib3's text, which names the host, port and path again and was cut
mid-word at 200 characters.
"""
from __future__ import annotations

import socket
import ssl
import threading

import pytest
import requests

from murmur_wsgi.cli import main
from murmur_wsgi.client.http import _reason
from tests.shared.hostile_server import Hostile, answer
from tests.tls_util import Authority

WAIT = 4.0


@pytest.fixture(autouse=True)
def no_ambient_door(monkeypatch, tmp_path):
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path / "home"))
    for name in ("MURMUR_DOOR_URL", "MURMUR_DOOR_TOKEN", "MURMUR_API_KEY", "MURMUR_TENANT"):
        monkeypatch.delenv(name, raising=False)


def one_line(capsys, url: str, *extra: str) -> str:
    """The error line of ``murmur-wsgi get t`` against ``url``: exit 2, nothing on stdout,
    one line naming ``url`` once."""
    assert main(["get", "t", "--url", url, "--timeout", str(WAIT), *extra]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.count(url) == 1, captured.err
    assert "Traceback" not in captured.err and "host=" not in captured.err, captured.err
    return captured.err


def test_a_closed_port(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    assert one_line(capsys, url) == (f"murmur-wsgi: cannot reach the door at {url}: "
                                     "connection refused\n")


def test_a_header_that_cannot_be_sent(capsys):
    with Hostile(lambda conn, request, server: None) as door:
        assert one_line(capsys, door.url, "--token", "ab\ncd") == (
            f"murmur-wsgi: the request to the door at {door.url} was not sent: the value of "
            "Authorization holds a line break or begins with a space (the value is not "
            "shown)\n")


def test_a_redirect_loop(capsys):
    def handler(conn, request, server):
        answer(conn, "302 Found", b"", extra="Location: /again\r\n")
    with Hostile(handler) as door:
        assert one_line(capsys, door.url) == (
            f"murmur-wsgi: the request to the door at {door.url} failed: Exceeded 30 "
            "redirects.\n")


def tls_failure(capsys, serve) -> tuple[str, str]:
    """``(url, error line)`` of ``get`` over https against a server of one connection,
    ``serve(conn)``."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        url = f"https://127.0.0.1:{listener.getsockname()[1]}"

        def accept():
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(WAIT)
                try:
                    serve(conn)
                except OSError:
                    pass                # the client gave up on TLS: as expected
        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        err = one_line(capsys, url)
        thread.join(WAIT)
    return url, err


def test_tls_to_a_server_that_speaks_plain_http(capsys):
    def serve(conn):
        conn.recv(65536)                # the client's hello, read as a request
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    url, err = tls_failure(capsys, serve)
    assert err == (f"murmur-wsgi: cannot reach the door at {url}: TLS failed: wrong version "
                   "number\n")


def test_tls_to_a_server_whose_certificate_is_not_trusted(capsys, tmp_path):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*Authority(tmp_path).issue())
    url, err = tls_failure(capsys, lambda conn: context.wrap_socket(conn, server_side=True))
    assert err.startswith(f"murmur-wsgi: cannot reach the door at {url}: TLS failed: "
                          "certificate verify failed: "), err


def test_a_server_that_never_answers(capsys):
    def handler(conn, request, server):
        server.stopping.wait(WAIT * 2)
    with Hostile(handler) as door:
        assert main(["get", "t", "--url", door.url, "--timeout", "0.3"]) == 2
    assert capsys.readouterr().err == (f"murmur-wsgi: the door at {door.url} did not answer "
                                       "within the timeout\n")


def test_an_answer_cut_short(capsys):
    def handler(conn, request, server):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")
    with Hostile(handler) as door:
        assert one_line(capsys, door.url) == (f"murmur-wsgi: cannot reach the door at "
                                              f"{door.url}: the connection broke during the "
                                              "answer\n")


@pytest.mark.parametrize("text, reason", [
    ("DeadlineHTTPPool(host='10.0.0.9', port=1): Max retries exceeded with url: /x "
     "(Caused by NewConnectionError(\"DeadlineHTTPConnection(host='10.0.0.9', port=1): "
     "Failed to establish a new connection: [Errno 101] Network is unreachable\"))",
     "network is unreachable"),
    ("HTTPConnectionPool(host='h', port=1): Max retries exceeded with url: /x (Caused by "
     "ProxyError('Unable to connect to proxy', OSError('Tunnel connection failed: 407')))",
     "Unable to connect to proxy"),
    ("HTTPConnectionPool(host='h', port=1): Max retries exceeded with url: /x (Caused by "
     "NewConnectionError(\"HTTPConnection(host='h', port=1): Failed to establish a new "
     "connection: gone\"))", "Failed to establish a new connection: gone"),
])
def test_urllib3s_wrapping_is_left_out_of_the_reason(text, reason):
    """Failures without a reason of their own (an errno's text, else what caused it): never
    urllib3's pool, host, port and path."""
    assert _reason(requests.ConnectionError(text)) == reason
