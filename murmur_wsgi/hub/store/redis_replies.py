"""The Redis store's hot paths' replies, read off a connection: ``read``.

``read(conn)`` answers as ``conn.read_response()`` does, for the connections
``redis_commands.Commands`` makes (redis-py's, with hiredis's parser).

PERF: redis-py reads a reply through three layers (the connection's
``read_response``, which formats its address for an error it may raise, the
parser's, and its socket read), and gevent's ``recv_into`` waits for the socket
under a ``gevent.Timeout`` made for each wait (seven calls of Python). ``read``
takes the reply from the connection's hiredis reader, and when it holds none reads
the socket as gevent does (tried, then waited for on a timer of its loop):
about 23 K fewer instructions per request of the floor of a blocking SendMessage
on Redis (two round trips), 53 K with a Redis as slow to answer as it is outside
valgrind (docs/performance.md). Anything else than a reply (an error reply, a
push, a failed or timed-out read, a closed socket) goes through
``conn.read_response()`` as it was met (``_replayed``): redis-py's own handling
(its exceptions, the connection closed, Sentinel's demoted primary, a push's
handler) runs on it.
"""
from __future__ import annotations

import socket
import sys
import time

import redis
from greenlet import getcurrent
from hiredis import PushNotification

try:                                      # NOTE: redis-py's own parser, by its private names
    from redis._parsers.hiredis import NOT_ENOUGH_DATA, _HiredisParser
except ImportError:                       # pragma: no cover - another redis-py: its own reads
    NOT_ENOUGH_DATA, _HiredisParser = object(), None



def _gevent_socket():
    """The socket class a gevent-patched process makes, once gevent is imported.

    NOTE: looked up, not imported: importing the library never imports gevent
    (tests/shared/test_import_order.py), which a process patches first."""
    return getattr(sys.modules.get("gevent.socket"), "socket", None)


_UNUSUAL = (redis.RedisError, PushNotification)


def read(conn):
    """The next reply of ``conn``, as ``conn.read_response()`` answers it."""
    parser = conn._parser
    sock = conn._sock
    reader = getattr(parser, "_reader", None)
    if reader is None or sock is None or type(parser) is not _HiredisParser:
        return conn.read_response()       # not connected, or another parser
    try:
        reply = reader.gets()
        if reply is NOT_ENOUGH_DATA:
            buffer = parser._buffer
            received = _first(sock, buffer)
            while received:
                reader.feed(buffer, 0, received)
                reply = reader.gets()
                if reply is not NOT_ENOUGH_DATA:
                    break
                received = sock.recv_into(buffer)
    except BaseException as ex:           # noqa: B036 - each handled as redis-py does
        return _replayed(conn, parser, reader, sock, failure=ex)
    if reply is NOT_ENOUGH_DATA:          # Redis closed the connection: it reads 0 again
        return _replayed(conn, parser, reader, sock)
    if isinstance(reply, _UNUSUAL) or \
            (type(reply) is list and reply and isinstance(reply[0], redis.ConnectionError)):
        return _replayed(conn, parser, reader, sock, reply=reply)     # an error, a push
    if conn.health_check_interval:
        conn.next_health_check = time.monotonic() + conn.health_check_interval
    return reply


def _first(sock, buffer) -> int:
    """``sock.recv_into(buffer)`` for a reply not yet begun; a gevent socket read as gevent
    reads it (tried, then waited for), without its layers."""
    if type(sock) is _gevent_socket():
        timeout = sock.timeout
        if timeout != 0.0:                # (0: a socket that never waits)
            try:
                return sock._sock.recv_into(buffer)
            except BlockingIOError:       # nothing yet: the command just went out
                _readable(sock, timeout)
            try:
                return sock._sock.recv_into(buffer)
            except BlockingIOError:
                pass                      # woken with nothing to read: wait as gevent does
    return sock.recv_into(buffer)


def _readable(sock, timeout) -> None:
    """Wait until gevent's ``sock`` has something to read, raising ``socket.timeout``
    past ``timeout`` seconds (None: no limit), as its own reads wait: on a timer of its
    loop, without a ``gevent.Timeout``."""
    hub = sock.hub
    if timeout is None:
        hub.wait(sock._read_event)
        return
    timer = hub.loop.timer(timeout, ref=True, priority=-1)        # as gevent.Timeout's
    timer.start(getcurrent().throw, socket.timeout, "timed out", update=True)
    try:
        hub.wait(sock._read_event)
    finally:
        timer.close()


class _Replay:
    """What ``read`` met, standing in for the parser's reader and socket for one
    ``conn.read_response()``: first the reply it took, or a read that fails as the real
    one did (``failure``), then the real reader and socket (a push is followed by the
    reply it came before)."""

    __slots__ = ("reply", "failure", "reader", "sock")

    def __init__(self, reply, failure, reader, sock):
        self.reply = reply
        self.failure = failure
        self.reader = reader
        self.sock = sock

    def gets(self, *args):
        reply = self.reply
        if self.failure is not None:
            return NOT_ENOUGH_DATA        # what the failed read was for
        if reply is NOT_ENOUGH_DATA:
            return self.reader.gets(*args)
        self.reply = NOT_ENOUGH_DATA
        return reply

    def feed(self, *args) -> None:
        self.reader.feed(*args)

    def recv_into(self, *args) -> int:
        failure = self.failure
        if failure is None:
            return self.sock.recv_into(*args)
        self.failure = None
        raise failure


def _replayed(conn, parser, reader, sock, reply=NOT_ENOUGH_DATA, failure=None):
    """``conn.read_response()`` on what ``read`` met, the parser's own reader and socket
    back after it unless it closed the connection."""
    replay = parser._reader = parser._sock = _Replay(reply, failure, reader, sock)
    try:
        return conn.read_response()
    finally:
        if parser._reader is replay:      # not disconnected (an error reply keeps it)
            parser._reader, parser._sock = reader, sock
