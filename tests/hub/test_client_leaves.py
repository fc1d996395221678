"""A blocking SendMessage whose client leaves cancels its run, on every server the hub is
served on (docs/hub.md, "How it differs from the door": a client that leaves, the run is
canceled).

The hub looks at its client through the socket the server gives: gunicorn's
``gunicorn.socket``, and Werkzeug's ``werkzeug.socket`` (``--dev``, ``flask run``).
"""
from __future__ import annotations

import json
import socket
import struct
import threading

from werkzeug.serving import make_server

from murmur_wsgi.hub import create_hub

from tests.hub.conftest import (KEY_A, HubClient, close_hub, hub_config, send_params,
                               wait_until)


def _request(params: dict) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                       "params": params}).encode()
    return (f"POST /a2a/v1/agents/held HTTP/1.1\r\nHost: hub\r\nA2A-Version: 1.0\r\n"
            f"X-API-Key: {KEY_A}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def test_a_blocking_send_whose_client_left_is_canceled_on_werkzeugs_server(store):
    """Werkzeug's threaded server (``murmur-wsgi hub --dev``): before, the hub could not see
    the client leave (it looked for gunicorn's socket only), and the run went on to its
    end or ``limits.run_timeout_secs``, holding one of the tenant's ``concurrency`` slots.
    On each store: the text's "cancelled, not charged" holds on Redis too."""
    hub = create_hub(hub_config(store=store))
    server = make_server("127.0.0.1", 0, hub, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    rpc = HubClient(hub, "held")
    try:
        client = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        client.sendall(_request(send_params("left-gate", context_id="ctx-left")))
        listed = lambda: rpc.result("ListTasks", {"contextId": "ctx-left"})["tasks"]  # noqa: E731
        wait_until(lambda: listed() and listed()[0]["status"]["state"] == "TASK_STATE_WORKING")
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        wait_until(lambda: listed()[0]["status"]["state"] == "TASK_STATE_CANCELED")
        assert "artifacts" not in rpc.result("GetTask", {"id": listed()[0]["id"]})
        assert hub.admission.running("acme") == 0
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()
        close_hub(hub)


def test_a_client_over_tls_that_sends_more_is_not_taken_for_gone(tmp_path):
    """Werkzeug's server with ``ssl_context`` (``flask run --cert``; gunicorn's TLS gives the
    same socket): a TLS socket refuses ``recv``'s MSG_PEEK, and before that refusal read as
    "gone", so a client that pipelined its next request on the connection of a held
    SendMessage had its run canceled. Its leaving is still seen."""
    import select
    import ssl

    from murmur_wsgi.serving.connection import peer_gone
    from tests.hub.push_util import make_cert

    cert_file, key_file = make_cert(tmp_path)
    held, release = [], threading.Event()

    def app(environ, start_response):
        held.append((peer_gone(environ), environ["werkzeug.socket"]))
        release.wait(10)
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    server = make_server("127.0.0.1", 0, app, threaded=True, ssl_context=(cert_file, key_file))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    context = ssl.create_default_context(cafile=cert_file)
    try:
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        client = context.wrap_socket(raw, server_hostname="127.0.0.1")
        request = b"GET / HTTP/1.1\r\nHost: hub\r\n\r\n"
        client.sendall(request)
        wait_until(lambda: held)
        gone, sock = held[0]
        client.sendall(request)                     # the next request, pipelined
        wait_until(lambda: select.select([sock], [], [], 0)[0])
        assert gone() is False
        client.close()
        wait_until(gone)
    finally:
        release.set()
        server.shutdown()
        thread.join(10)
        server.server_close()
