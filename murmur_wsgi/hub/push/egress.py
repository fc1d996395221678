"""Egress that cannot be turned against the network: one checked POST to a webhook.

Per connection the host is resolved once (``resolver``); if ANY address is
outside the public internet (addresses.py), nothing is dialed. The lookup
(``getaddrinfo``: no timeout of its own, the system resolver's can be tens of
seconds) runs on a thread of its own and is waited for only until the
attempt's deadline; an attempt for a host whose lookup still runs waits on
that one rather than start another (``Lookups``), so a host whose name
servers never answer holds one lookup, not one per attempt. Otherwise the
connection goes to an address that was checked (no second lookup, so no DNS
rebinding), TLS verified against the URL's host name (SNI too), never
through a proxy (http.client reads no ``HTTPS_PROXY``), never following a
redirect (http.client does not), and only to the allowed ports. The whole
attempt has ``timeout`` seconds: the handshake, every write of the request
and every read of the answer get only what is left of them, and at the
deadline a cut (cuts.py) shuts the connection down, so a receiver that takes
the request, or sends its handshake or its answer, a byte at a time cannot
hold an attempt longer (gevent's SSL socket bounds each wait of a step by the
timeout, not the whole step). A request http.client cannot write (a url path
that is not ASCII, a token that is not Latin-1 or holds a control character:
a config saved before Create refused them) is refused before anything is
resolved: its answer is final.
"""
from __future__ import annotations

import _thread
import functools
import http.client
import io
import logging
import socket
import ssl
import threading
import time
from urllib.parse import urlsplit

from murmur_wsgi.cuts import Cut
from murmur_wsgi.hub.push import addresses
from murmur_wsgi.hub.push.rules import header_value

logger = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 64 * 1024        # what is read of a receiver's answer (then dropped)
WRITE_BYTES = 16 * 1024             # the most one write of the request sends (a TLS record)


class Refused(Exception):
    """The guard dialed nothing: the answer is final (``str()`` is the public reason)."""


class NetworkError(Exception):
    """The attempt failed on the way (resolution, connection, TLS, timeout): retried."""


def writable(target: str, headers: dict) -> bool:
    """Whether http.client writes this request as it is: an ASCII target, and header values
    it writes as they are (rules.header_value)."""
    return target.isascii() and all(header_value(v) for v in headers.values())


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (one lookup)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


class _Lookup:
    """One lookup in flight: ``done`` is set once ``addresses`` or ``error`` is."""

    __slots__ = ("done", "addresses", "error")

    def __init__(self):
        self.done = threading.Event()
        self.addresses = None
        self.error = None


class Lookups:
    """Host lookups through ``resolver(host, port)``, each waited for up to a deadline.

    Concurrency: ``_lock`` guards ``_running`` ((host, port) -> the ``_Lookup`` in
    flight); the thread that runs a lookup removes it once it has ended, so a later
    attempt looks the host up afresh (nothing is cached).
    """

    def __init__(self, resolver):
        self.resolver = resolver
        self._lock = threading.Lock()
        self._running: dict[tuple, _Lookup] = {}

    def resolve(self, host: str, port: int, deadline: float) -> list[str]:
        """The addresses of ``host``; the resolver's error, or TimeoutError at ``deadline``."""
        key = (host, port)
        with self._lock:
            lookup = self._running.get(key)
            fresh = lookup is None
            if fresh:
                lookup = self._running[key] = _Lookup()
        if fresh:
            _thread.start_new_thread(self._run, (key, lookup))
        if not lookup.done.wait(max(0.0, deadline - time.monotonic())):
            raise TimeoutError("timed out")
        if lookup.error is not None:
            raise lookup.error
        if lookup.addresses is None:            # its thread was ended (the worker exits)
            raise OSError("the lookup was ended")
        return list(lookup.addresses)

    def _run(self, key: tuple, lookup: _Lookup) -> None:
        try:
            lookup.addresses = self.resolver(*key)
        except Exception as ex:  # noqa: BLE001 - handed to every attempt that waits on it
            lookup.error = ex
        finally:
            with self._lock:
                self._running.pop(key, None)
            lookup.done.set()


def checked_addresses(host: str, port: int, resolver, allow: list) -> list:
    """The addresses to dial, each checked; Refused when any is not public."""
    literal = addresses.parse(host)
    if literal is not None:
        found = [literal]
    else:
        try:
            raw = resolver(host, port)
        except TimeoutError:
            raise NetworkError("timed out") from None
        except (OSError, UnicodeError) as ex:
            raise NetworkError(f"the host does not resolve ({type(ex).__name__})") from None
        found = []
        for text in raw:
            ip = addresses.parse(text)
            if ip is None:
                raise Refused("refused: the host resolved to something that is not an address")
            found.append(ip)
        if not found:
            raise NetworkError("the host does not resolve")
    for ip in found:
        if not addresses.reachable(ip, allow):
            raise Refused("refused: an address of the host is outside the public internet")
    return found


class _DeadlineReader(io.RawIOBase):
    """A socket's bytes, each read given only the time left before ``deadline``."""

    def __init__(self, sock, deadline: float):
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class _Answer(http.client.HTTPResponse):
    """http.client's answer, read through a ``_DeadlineReader``; a chunk size below 0 is
    a bad answer (http.client reads a chunk of -1 bytes to the end of the stream, past any
    limit of the read)."""

    def __init__(self, sock, *args, deadline: float, **kwargs):
        super().__init__(sock, *args, **kwargs)
        self.fp.close()
        self.fp = io.BufferedReader(_DeadlineReader(sock, deadline))

    def _read_next_chunk_size(self) -> int:
        size = super()._read_next_chunk_size()
        if size < 0:
            self._close_conn()
            raise ValueError("a chunk size below 0")     # http.client: IncompleteRead
        return size


class PinnedConnection(http.client.HTTPSConnection):
    """An HTTPS connection to one checked address, TLS checked against ``host``; the
    request is written and the answer read by ``deadline`` (``time.monotonic()``)."""

    def __init__(self, host: str, port: int, address, context: ssl.SSLContext,
                 deadline: float):
        super().__init__(host, port, timeout=max(0.001, deadline - time.monotonic()),
                         context=context)
        self._address = address
        self._deadline = deadline
        self.response_class = functools.partial(_Answer, deadline=deadline)
        self._cut = None                # the deadline's Cut, of a duplicate of the socket
        self._peer = None               # that duplicate (wrapping detaches the socket)
        self.cut = False                # the deadline cut the connection (set by close())

    def connect(self) -> None:
        family = socket.AF_INET6 if self._address.version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._peer = sock.dup()
            self._cut = Cut(self._peer, max(0.0, self._deadline - time.monotonic()))
            sock.settimeout(self.timeout)
            sock.connect((str(self._address), self.port))
            sock.settimeout(max(0.001, self._deadline - time.monotonic()))   # the handshake's
            self.sock = self._context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            self.close()
            raise

    def send(self, data) -> None:
        """Write ``data`` (bytes: all the egress sends), each write given only the time left
        before the deadline, whatever timeout the socket had."""
        if self.sock is None:
            raise http.client.NotConnected()
        left = memoryview(data).cast("B")
        while left:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("timed out")
            self.sock.settimeout(remaining)
            left = left[self.sock.send(left[:WRITE_BYTES]):]

    def close(self) -> None:
        """Close the connection, and disarm its cut (``cut``: whether it had fired)."""
        try:
            super().close()
        finally:
            cut, self._cut = self._cut, None
            peer, self._peer = self._peer, None
            if cut is not None:
                self.cut = not cut.disarm()
            if peer is not None:
                peer.close()


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_file) if ca_file \
        else ssl.create_default_context()
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    return context


class Egress:
    """POSTs to webhook URLs under the guard; ``resolver`` is a seam for tests."""

    def __init__(self, ports, allow: list, ca_file: str | None = None):
        self.ports = frozenset(ports)
        self.allow = allow
        self.context = tls_context(ca_file)
        self.resolver = system_resolver
        self.lookups = Lookups(lambda host, port: self.resolver(host, port))

    def post(self, url: str, body: bytes, headers: dict, timeout: float) -> int:
        """The answer's status; Refused (nothing dialed) or NetworkError."""
        deadline = time.monotonic() + timeout
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or 443
        if parts.scheme != "https" or not host:
            raise Refused("refused: not an https URL")
        if port not in self.ports:
            raise Refused("refused: the port is not allowed")
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        if not writable(target, headers):
            raise Refused("refused: the url or the token cannot be written in an HTTP "
                          "request")
        resolve = functools.partial(self.lookups.resolve, deadline=deadline)
        targets = checked_addresses(host, port, resolve, self.allow)
        conn, last = None, None
        for address in targets:
            if deadline <= time.monotonic():
                break
            candidate = PinnedConnection(host, port, address, self.context, deadline)
            try:
                candidate.connect()
            except ssl.SSLError as ex:
                candidate.close()
                if candidate.cut:
                    raise NetworkError("timed out") from None
                raise NetworkError(f"TLS failed ({ex.reason or 'handshake'})") from None
            except OSError as ex:
                candidate.close()
                last = None if candidate.cut else ex        # None: timed out
                continue
            conn = candidate
            break
        if conn is None:
            raise NetworkError(_network_reason(last))
        failed = None
        try:
            conn.request("POST", target, body=body, headers=headers)
            conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
            answer = conn.getresponse()
            answer.read(MAX_ANSWER_BYTES)
        except (OSError, http.client.HTTPException) as ex:
            failed = ex
        finally:
            conn.close()
        # NOTE: a cut answer may read as a short one, without an error: the cut says.
        if conn.cut:
            raise NetworkError("timed out")
        if failed is not None:
            raise NetworkError(_network_reason(failed))
        return answer.status


def _network_reason(ex) -> str:
    if ex is None or isinstance(ex, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(ex, ConnectionRefusedError):
        return "connection refused"
    if isinstance(ex, http.client.HTTPException):
        return f"bad HTTP answer ({type(ex).__name__})"
    return f"network error ({type(ex).__name__})"
