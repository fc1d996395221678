"""A raw HTTP server for the client's hostile-server tests: whatever bytes a test scripts.

``Hostile(handler)`` listens on a free loopback port; each connection's request
(``Request``: method, path, headers, body) is recorded in ``requests`` and handed
to ``handler(conn, request, server)``, which writes what it likes on the socket
and may wait on ``server.stopping`` (set when the test ends) to hold a connection
open. Nothing here sleeps: a handler that trickles waits on ``stopping`` with a
timeout.
"""
from __future__ import annotations

import json
import re
import socket
import threading
from dataclasses import dataclass, field

WAIT = 10.0


@dataclass
class Request:
    method: str
    path: str
    headers: dict = field(default_factory=dict)
    body: bytes = b""


def read_request(conn) -> Request | None:
    """The next request on ``conn`` (None once the client hangs up)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return Request(method, path, headers, body)


def answer(conn, status: str, body: bytes, content_type: str = "application/json",
           extra: str = "") -> None:
    """One whole HTTP/1.1 answer, then the connection closes."""
    conn.sendall((f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                  f"Content-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n")
                 .encode("latin-1") + body)


def rpc_answer(conn, request: Request, result=None, *, error=None) -> None:
    """A JSON-RPC answer to ``request`` (its id echoed)."""
    sent = json.loads(request.body or b"{}")
    body = {"jsonrpc": "2.0", "id": sent.get("id")}
    body.update({"error": error} if error is not None else {"result": result})
    answer(conn, "200 OK", json.dumps(body).encode())


def request_id(request: Request) -> bytes:
    """The id of the JSON-RPC request ``request`` carries, as its JSON text (read without
    parsing the body, which may be megabytes)."""
    found = re.search(rb'"id": (\d+)', request.body)
    return found.group(1) if found else b"null"


def card(url: str, **more) -> dict:
    """An agent card whose JSON-RPC endpoint is ``url``."""
    return dict({"name": "hostile", "version": "1", "supportedInterfaces": [
        {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": True}}, **more)


class Hostile:
    """A loopback server running ``handler`` on every connection, in its own thread."""

    def __init__(self, handler):
        self.handler = handler
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self._accept.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        # PERF: a connection of its own wakes the accept at once (it waits up to 50 ms for
        # one, then looks at ``stopping``): 50 ms at the end of every test here.
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=WAIT).close()
        except OSError:
            pass                        # the accept's own timeout ends it
        self._accept.join(WAIT)
        self.sock.close()
        for thread in self._threads:
            thread.join(WAIT)

    def _serve(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            if self.stopping.is_set():
                conn.close()            # the wake of __exit__ (or a client too late)
                break
            thread = threading.Thread(target=self._one, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _one(self, conn):
        with conn:
            conn.settimeout(WAIT)
            try:
                request = read_request(conn)
                if request is not None:
                    self.requests.append(request)
                    self.handler(conn, request, self)
            except OSError:
                pass                    # the client hung up: as a test expects


def run_in_thread(call, timeout: float):
    """``call()`` in a thread: ``(finished, result or exception)`` after at most ``timeout``."""
    box: dict = {}
    done = threading.Event()

    def target():
        try:
            box["value"] = call()
        except BaseException as ex:     # noqa: BLE001 - handed to the test
            box["value"] = ex
        finally:
            done.set()

    threading.Thread(target=target, daemon=True).start()
    finished = done.wait(timeout)
    return finished, box.get("value")
