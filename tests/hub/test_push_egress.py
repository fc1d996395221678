"""The egress guard: resolved-address tables (an injected resolver), rebinding, TLS against
the host name, no proxy. Every connection made here goes to 127.0.0.1 only."""
from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import threading
import time

import pytest

from murmur_wsgi.hub.push import addresses
from murmur_wsgi.hub.push.egress import (NetworkError, PinnedConnection, Refused,
                                         checked_addresses, tls_context)
from tests.hub.conftest import wait_until
from tests.hub.push_util import (HOOK_HOST, cert, phub, prpc, receiver,  # noqa: F401
                                 status_of)

NOT_PUBLIC = [
    "0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.254",
    "127.0.0.1", "127.255.0.1", "169.254.169.254", "169.254.0.1", "172.16.0.1",
    "172.31.255.255", "192.0.0.8", "192.0.2.1", "192.88.99.1", "192.168.0.1",
    "198.18.0.1", "198.19.255.1", "198.51.100.1", "203.0.113.1", "224.0.0.1",
    "239.255.255.250", "240.0.0.1", "255.255.255.255",
    "::", "::1", "::ffff:127.0.0.1", "::ffff:8.8.8.8", "::ffff:169.254.169.254",
    "::127.0.0.1", "64:ff9b::a00:1", "64:ff9b::808:808", "64:ff9b:1::1",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::1", "2002:c000:201::1",
    "2002:808:808::1", "2001:db8::1", "3fff::1", "2001:2::1", "2001:10::1", "2001:20::1",
    "100::1", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "fec0::1", "ff02::1",
    "ff0e::1", "5f00::1",
]
PUBLIC_ADDRESSES = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "100.128.0.1", "172.32.0.1",
                    "2606:4700:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001::1"]


@pytest.mark.parametrize("address", NOT_PUBLIC)
def test_outside_the_public_internet(address):
    assert addresses.is_public(ipaddress.ip_address(address)) is False


@pytest.mark.parametrize("address", PUBLIC_ADDRESSES)
def test_public(address):
    assert addresses.is_public(ipaddress.ip_address(address)) is True


def table(answer):
    calls = []

    def resolve(host, port):
        calls.append((host, port))
        return answer
    resolve.calls = calls
    return resolve


@pytest.mark.parametrize("answer", [
    ["8.8.8.8", "10.0.0.1"], ["2606:4700:4700::1111", "::1"], ["1.1.1.1", "169.254.169.254"],
    ["::ffff:10.0.0.1"], ["64:ff9b::a9fe:a9fe"], ["100.64.1.1"], ["fd00::53"],
    ["2001:4860:4860::8888", "fe80::1"],
])
def test_any_address_outside_refuses_the_host(answer):
    with pytest.raises(Refused) as info:
        checked_addresses("hooks.example.com", 443, table(answer), [])
    assert str(info.value) == "refused: an address of the host is outside the public internet"


def test_all_public_addresses_are_kept_in_order():
    found = checked_addresses("hooks.example.com", 443,
                              table(["2606:4700:4700::1111", "8.8.8.8"]), [])
    assert [str(a) for a in found] == ["2606:4700:4700::1111", "8.8.8.8"]


def test_allow_networks_admits_only_those():
    allow = [ipaddress.ip_network("127.0.0.0/8")]
    assert [str(a) for a in checked_addresses("h", 443, table(["127.0.0.1"]), allow)] == \
        ["127.0.0.1"]
    with pytest.raises(Refused):
        checked_addresses("h", 443, table(["127.0.0.1", "::1"]), allow)


def test_an_ip_literal_is_not_resolved():
    resolve = table(["8.8.8.8"])
    with pytest.raises(Refused):
        checked_addresses("10.0.0.1", 443, resolve, [])
    assert resolve.calls == []


def test_nothing_resolved_is_a_network_error():
    with pytest.raises(NetworkError):
        checked_addresses("h", 443, table([]), [])


def settled(rpc, task_id, config_id, failures):
    wait_until(lambda: status_of(rpc, task_id, config_id)["failures"] == failures)
    return status_of(rpc, task_id, config_id)


def test_a_host_with_one_private_address_is_never_dialed(phub, prpc, receiver):
    phub.resolver.table[HOOK_HOST] = ["127.0.0.1", "10.0.0.5"]
    task = prpc.send("hi", configuration={"taskPushNotificationConfig": {
        "id": "c1", "url": receiver.url(HOOK_HOST)}})
    status = settled(prpc, task["id"], "c1", 3)
    assert status["lastError"] == \
        "refused: an address of the host is outside the public internet"
    assert receiver.requests == []
    assert phub.sleeps.calls == []                       # refused is final: no retries
    assert phub.resolver.calls == [HOOK_HOST] * 3        # one lookup per event


def test_resolved_once_per_connection_and_rebinding_is_refused(phub, prpc, receiver):
    answers = iter([["127.0.0.1"], ["169.254.169.254"], ["127.0.0.1"]])
    phub.resolver.table[HOOK_HOST] = lambda: next(answers)
    task = prpc.send("hi", configuration={"taskPushNotificationConfig": {
        "id": "c1", "url": receiver.url(HOOK_HOST)}})
    status = settled(prpc, task["id"], "c1", 0)
    wait_until(lambda: len(receiver.requests) == 2 and phub.push.dispatcher.idle())
    status = status_of(prpc, task["id"], "c1")
    assert phub.resolver.calls == [HOOK_HOST] * 3
    got = [r.json for r in receiver.requests]
    assert "task" in got[0] and got[1]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert status["lastError"] == \
        "refused: an address of the host is outside the public internet"
    assert receiver.requests[0].headers["Host"] == f"{HOOK_HOST}:{receiver.port}"


def test_tls_is_verified_against_the_host_name(phub, prpc, receiver):
    phub.resolver.table["wrong.test"] = ["127.0.0.1"]
    task = prpc.send("hi", configuration={"taskPushNotificationConfig": {
        "id": "c1", "url": receiver.url("wrong.test")}})
    status = settled(prpc, task["id"], "c1", 3)
    assert status["lastError"] == "TLS failed (CERTIFICATE_VERIFY_FAILED)"
    assert receiver.requests == []


def test_no_proxy_is_used(phub, prpc, receiver, monkeypatch):
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    prpc.send("hi", configuration={"taskPushNotificationConfig": {"url": receiver.url()}})
    assert len(receiver.wait_for(3)) == 3


def test_the_system_resolver_on_an_ip_literal(phub, prpc, receiver):
    from murmur_wsgi.hub.push.egress import system_resolver

    phub.push.egress.resolver = system_resolver
    prpc.send("hi", configuration={"taskPushNotificationConfig": {"url": receiver.url()}})
    assert len(receiver.wait_for(3)) == 3


@contextlib.contextmanager
def one_tls_server(phub, cert, serve, rcvbuf=None):
    """A one-connection TLS server on 127.0.0.1 running ``serve(tls, done)``, its port
    allowed to ``phub``'s egress: yields the port; on exit ``done`` is set and the server
    joined."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*cert)
    listener = socket.socket()
    if rcvbuf is not None:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # the accepted one's
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    done = threading.Event()

    def run():
        conn, _ = listener.accept()
        with context.wrap_socket(conn, server_side=True) as tls:
            try:
                serve(tls, done)
            except OSError:
                pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    egress = phub.push.egress
    egress.ports = frozenset(egress.ports | {port})
    try:
        yield port
    finally:
        done.set()
        thread.join(5)
        listener.close()


def cut_at_deadline(phub, cert, serve, body: bytes, attempt: float, rcvbuf=None) -> float:
    """POST ``body`` to ``one_tls_server`` running ``serve(tls, done)``; the attempt must
    end "timed out": returns how long it took."""
    with one_tls_server(phub, cert, serve, rcvbuf) as port:
        started = time.monotonic()
        with pytest.raises(NetworkError, match="timed out"):
            phub.push.egress.post(f"https://127.0.0.1:{port}/hook", body, {}, attempt)
        return time.monotonic() - started


@pytest.mark.timed          # a bound in seconds
@pytest.mark.waits
def test_a_receiver_that_answers_byte_by_byte_is_cut_at_the_attempts_deadline(phub, cert):
    # NOTE: each read had the whole attempt's time left when it began, so an answer
    # dribbled a byte at a time (here 3 s of header) held the 0.5 s attempt until it ended,
    # and was delivered: a receiver could keep a delivery thread, past its lease, forever.
    def serve(tls, done):
        got = b""
        while b"\r\n\r\n" not in got:
            got += tls.recv(65536)
        tls.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        for _ in range(30):
            if done.wait(0.1):
                return
            tls.sendall(b"a")
        tls.sendall(b"\r\nContent-Length: 0\r\n\r\n")

    assert cut_at_deadline(phub, cert, serve, b"{}", 0.5) < 1.3


@pytest.mark.timed
@pytest.mark.waits
def test_writing_the_request_has_only_what_is_left_of_the_attempt():
    # NOTE: the connection's writes took whatever timeout its socket had, set once before
    # the request; now each write gets only what is left before the attempt's deadline.
    # (On CPython the request is one sendall, which socket and ssl already bound as a
    # whole by the timeout set just before it: no receiver could make it outlast the
    # attempt, see the test below; this holds whatever the socket's timeout.)

    address = ipaddress.ip_address("127.0.0.1")
    ours, peer = socket.socketpair()                      # the peer never reads
    try:
        # NOTE: both buffers filled first: the write below waits for room from its first
        # byte, whenever the thread runs (a pause past the deadline before the first write
        # wrote nothing, and there was nothing to drain).
        ours.setblocking(False)
        with pytest.raises(BlockingIOError):
            while True:
                ours.send(b"x" * 65536)
        ours.settimeout(5.0)
        started = time.monotonic()
        conn = PinnedConnection(HOOK_HOST, 443, address, tls_context(None), started + 0.3)
        conn.sock = ours
        with pytest.raises(TimeoutError):
            conn.send(b"x" * (16 * 1024 * 1024))          # more than both buffers hold
        assert 0.3 <= time.monotonic() - started < 1.0
        late = PinnedConnection(HOOK_HOST, 443, address, tls_context(None), time.monotonic())
        late.sock = ours
        peer.setblocking(False)
        drained = 0
        while True:
            try:
                drained += len(peer.recv(1 << 20))
            except BlockingIOError:
                break
        with pytest.raises(TimeoutError):
            late.send(b"late")                            # past the deadline: nothing written
        with pytest.raises(BlockingIOError):
            peer.recv(1 << 20)
        assert drained > 0
    finally:
        ours.close()
        peer.close()


@pytest.mark.timed          # a bound in seconds
@pytest.mark.waits
def test_a_receiver_that_reads_the_body_slowly_is_cut_at_the_attempts_deadline(phub, cert):
    # A final Task near 64 KiB to a receiver whose window is 2 KiB and that reads 256 bytes
    # every 20 ms: the write never completes within the attempt.
    received = []

    def serve(tls, done):
        while not done.wait(0.02):
            chunk = tls.recv(256)
            if not chunk:
                return
            received.append(len(chunk))

    body = b"x" * (64 * 1024 - 100)
    assert cut_at_deadline(phub, cert, serve, body, 0.5, rcvbuf=2048) < 1.3
    assert 0 < sum(received) < len(body)                  # it was still writing when cut


@pytest.mark.timed          # a bound in seconds
@pytest.mark.waits
def test_a_lookup_that_does_not_end_is_cut_at_the_attempts_deadline(phub):
    # NOTE: before, the lookup (getaddrinfo: no timeout of its own, the system resolver's
    # own, tens of seconds for a host whose name servers never answer) held the attempt
    # until it returned. Now each attempt waits for it only until its deadline, and the
    # attempts that come while it runs wait on it too rather than start one each.
    release = threading.Event()
    calls = []

    def stuck(host, port):
        calls.append(host)
        release.wait(30)
        return ["127.0.0.1"]

    egress = phub.push.egress
    egress.resolver = stuck
    outcomes = []

    def attempt():
        try:
            egress.post("https://slow.test/h", b"{}", {}, 0.3)
        except NetworkError as ex:
            outcomes.append(str(ex))
    try:
        for _ in range(3):
            thread = threading.Thread(target=attempt)
            thread.start()
            thread.join(2.0)
            assert not thread.is_alive(), "the attempt waited for the lookup past its deadline"
        assert outcomes == ["timed out"] * 3
        assert calls == ["slow.test"]                     # one lookup, however many attempts
    finally:
        release.set()


def test_an_answer_of_a_negative_chunk_size_is_a_bad_answer_not_read_to_its_end(phub, cert):
    # NOTE: http.client reads a chunk of size -1 as "read to the end": the answer of a
    # receiver that then streamed without end was all kept in memory until the attempt's
    # deadline (740 MB in a 3 s attempt on loopback), the limit of 64 KiB read aside.
    sent = []

    def serve(tls, done):
        got = b""
        while b"\r\n\r\n" not in got:
            got += tls.recv(65536)
        tls.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n")
        while True:
            tls.sendall(b"x" * 65536)
            sent.append(65536)

    with one_tls_server(phub, cert, serve) as port:
        with pytest.raises(NetworkError, match=r"bad HTTP answer \(IncompleteRead\)"):
            phub.push.egress.post(f"https://127.0.0.1:{port}/hook", b"{}", {}, 5.0)
    assert sum(sent) < 64 * 1024 * 1024            # what the buffers took, not a stream
