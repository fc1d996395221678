"""The Redis store's hot paths on connections of their own: ``Commands``.

Single commands, several commands in one round trip, and Lua scripts
(``EVALSHA``, ``EVAL`` once when Redis forgot it), on connections made as the
client's pool makes them; a write the hub acknowledges can carry its ``WAIT``
for the replicas in the same round trip (``durable``).
"""
from __future__ import annotations

import functools
import hashlib
import socket
import threading
import time

import redis

from murmur_wsgi.hub.store.forks import anew_in_child
from murmur_wsgi.hub.store.redis_pool import MAX_CONNECTIONS, WAIT_SECS
from murmur_wsgi.hub.store.redis_redirects import REDIRECTED
from murmur_wsgi.hub.store.redis_replies import read
from murmur_wsgi.hub.store.turns import Turns

try:                                      # PERF: one C call packs a command (redis[hiredis])
    from hiredis import pack_command as _pack_command
except ImportError:                       # pragma: no cover - hiredis is a dependency
    _pack_command = None

PIECE_CHARS = 256 * 1024         # a longer str argument is sent in pieces (``_pieces``)
READ_BYTES = 16 * 1024           # each connection's socket read buffer (redis-py's: 32 KiB)


_ASKING = ("ASKING",)


def script_sha(source: str) -> str:
    """The SHA1 by which ``EVALSHA`` (and ``EVALSHA_RO``) names ``source``."""
    return hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()


class Unreplicated(redis.RedisError):
    """A write done on the primary that fewer replicas than asked acknowledged in time."""


def _is_long(arg) -> bool:
    return isinstance(arg, str) and len(arg) > PIECE_CHARS


class Short(tuple):
    """A command none of whose arguments is ``_is_long``, as its caller knows (a script's
    ``run(short=True)``): ``_any_long`` does not look at each. PERF: a blocking
    SendMessage's two scripts carry about 90 arguments, each looked at for about 500
    instructions (docs/performance.md); their callers measure the few that can be long."""

    __slots__ = ()


def short(*texts: str) -> bool:
    """Whether none of ``texts`` is longer than ``PIECE_CHARS``: given a script call's
    arguments of unbounded length (texts, the client's ids, which its keys hold too), that
    none of the call's is (its others are the hub's own names and numbers): ``run(short=…)``."""
    return max(map(len, texts)) <= PIECE_CHARS


def _any_long(commands) -> bool:
    """Whether an argument of ``commands`` is ``_is_long`` (inline: a script has dozens);
    a ``Short`` command's are not looked at."""
    for command in commands:
        if type(command) is Short:
            continue
        for arg in command:
            if isinstance(arg, str) and len(arg) > PIECE_CHARS:
                return True
    return False


def _packed(conn, commands) -> list:
    """``commands`` in the Redis protocol, as one bytes to send.

    PERF: hiredis packs a command in one call; redis-py's packer (``pack_commands``)
    looks at every argument in Python first, and a run's two scripts carry about 80:
    about a tenth of the instructions of a blocking SendMessage on Redis
    (docs/performance.md). The bytes are the same."""
    if _pack_command is None:
        return conn.pack_commands(commands)
    try:
        return [b"".join(map(_pack_command, commands))]
    except TypeError as ex:               # as redis-py's packer says it
        raise redis.DataError(str(ex)) from None


def _write(conn, packed: list) -> None:
    """``packed`` (``_packed``'s bytes) sent on ``conn``, as its ``send_packed_command``
    sends them, which connects it first and checks its health when due (it does so here).

    PERF: gevent's ``sendall`` asks the socket its send buffer's size (a system call)
    each time, before it sends: a third of a Redis command's system calls, and about 2 % of
    a worker's time per blocking SendMessage on Redis. A command is a few KiB: one ``send``
    takes it whole; what it leaves, ``sendall`` sends."""
    sock = getattr(conn, "_sock", None)
    if sock is None or (conn.health_check_interval
                        and time.monotonic() > conn.next_health_check):
        conn.send_packed_command(packed)
        return
    try:
        for data in packed:
            sent = sock.send(data)
            if sent < len(data):
                sock.sendall(memoryview(data)[sent:])
    except socket.timeout:
        conn.disconnect()
        raise redis.TimeoutError("Timeout writing to socket") from None
    except OSError as ex:
        conn.disconnect()
        raise redis.ConnectionError(f"Error while writing to socket: {ex}") from None
    except BaseException:
        conn.disconnect()                  # a partial command: the connection cannot stay
        raise


def _pieces(conn, commands):
    """``commands`` in the Redis protocol, as bytes sent one after another: a long str
    argument (``_is_long``: the answer of a large task) is encoded a piece of at most
    ``PIECE_CHARS`` characters at a time, as the socket takes them, never whole."""
    encode = conn.encoder.encode
    for command in commands:
        head = [b"*%d\r\n" % len(command)]
        for arg in command:
            if not _is_long(arg):
                value = encode(arg)
                head.append(b"$%d\r\n%s\r\n" % (len(value), value))
                continue
            step = PIECE_CHARS if arg.isascii() else PIECE_CHARS // 4
            size = len(arg) if arg.isascii() else \
                sum(len(encode(arg[at:at + step])) for at in range(0, len(arg), step))
            head.append(b"$%d\r\n" % size)
            yield b"".join(head)
            for at in range(0, len(arg), step):
                yield encode(arg[at:at + step])
            head = [b"\r\n"]
        yield b"".join(head)


class Commands:
    """Single commands and Lua scripts on connections of its own: the store's hot paths
    (GetTask's read of a record, a message's claim, a run's scripts).

    PERF: redis-py's pool lends each command a connection through two locks, two
    pid checks, four observability records and an event, and the client wraps it
    in a retry closure and a deprecation shim: under gevent, about 30 µs of a
    worker's 260 per GetTask, and 74 of 578 per blocking SendMessage
    (docs/performance.md). These connections are the client's kind, with its
    settings (address, password, TLS, timeouts, health check), made as its pool
    makes them; idle ones wait in a list (``pop`` and ``append`` are atomic, so
    one in use is its caller's only). A connection
    closes itself on any failure, its reply unread; a command that failed on a
    closed connection is sent once more on a new one, as the client's ``Retry``
    does (a timed-out one is not).

    At most ``max_open`` connections are in use at once (a caller waits up to
    ``wait_secs`` for one, first come, first served, then fails as Redis being away
    does), so a burst of requests or of streams opening cannot open one each;
    ``prune()`` (the replica's turn, every second) closes those a burst left idle,
    keeping ``keep``: the connections follow the load, and an idle worker holds few.

    MEMORY: each connection reads the socket ``READ_BYTES`` at a time (redis-py's
    default is twice that): a burst of streams opening, which opens up to ``max_open``,
    leaves the worker about 1 KiB less per stream held after it (a large answer is
    read in more pieces; the hub's hot replies are a few KiB).

    A str argument longer than ``PIECE_CHARS`` (a large task's answer) is sent in
    pieces encoded as the socket takes them (``_pieces``), never packed into one
    command of its size.

    A forked child starts with none of them (``forked``): a connection of the parent's is
    its socket, whose answers the two processes would read in turn.
    """

    def __init__(self, client: redis.Redis, max_open: int = MAX_CONNECTIONS,
                 wait_secs: float = WAIT_SECS, replicas: int = 0, replicas_ms: int = 1000,
                 keep: int = 2,
                 idle_secs: float = 5.0, clock=time.monotonic):
        pool = client.connection_pool
        self._make = functools.partial(pool.connection_class, **{
            **pool.connection_kwargs, "socket_read_size": READ_BYTES})
        self._idle: list = []           # (connection, when it came back), the newest last
        self._keep = keep
        self._idle_secs = idle_secs
        self._clock = clock
        self._max_open = max_open
        self._opened = 0                # connections made and not closed (guarded by _lock)
        self._lock = threading.Lock()   # guards _opened, and a look at _idle with it
        self._turns = Turns()           # callers waiting for a connection, the oldest first
        self._wait = wait_secs
        self._closed = False
        self._replicas = replicas
        self._ack = ("WAIT", replicas, max(1, replicas_ms))
        anew_in_child(self)

    def __call__(self, *args):
        """One command's answer, in one frame (``_send``'s single-command path, inline)."""
        if _any_long((args,)):
            return self.several(args)[0]
        conn = self._take()
        try:
            try:
                _write(conn, _packed(conn, (args,)))
                return read(conn)
            except redis.ConnectionError:      # it closed itself: once more, a new connection
                _write(conn, _packed(conn, (args,)))
                return read(conn)
        finally:
            self._give(conn)

    def durable(self, *args):
        """``args``' answer once ``replicas`` replicas hold the write (``WAIT``, sent with it:
        one round trip; WAIT counts every write of the connection before it); raise
        ``Unreplicated`` when fewer did within ``replicas_ms``."""
        return self.after((), args, durable=True)

    def several(self, *commands: tuple, asking: bool = True) -> list:
        """Each command's answer, sent together on one connection: one round trip
        (``asking``: a cluster's, ``redis_cluster``)."""
        conn = self._take()
        try:
            try:
                return self._send(conn, commands)
            except redis.ConnectionError:
                return self._send(conn, commands)  # it closed itself: a new connection
        finally:
            self._give(conn)

    def answers(self, *commands: tuple, asked: bool = False, durable: bool = False) -> list:
        """Each command's answer, an error reply in its place (not raised), in one round trip
        as ``several``: a cluster's, which follows each command's redirection
        (``redis_redirects``). ``asked``: each command after an ``ASKING``; ``durable``: with
        its ``WAIT`` last, ``Unreplicated`` raised when fewer replicas than asked hold the
        writes and no command was redirected."""
        sent = [part for command in commands for part in (_ASKING, command)] if asked \
            else list(commands)
        ack = durable and self._replicas
        if ack:
            sent.append(self._ack)
        conn = self._take()
        try:
            try:
                found = self._send(conn, sent, raising=False)
            except redis.ConnectionError:
                found = self._send(conn, sent, raising=False)  # it closed itself: a new one
        finally:
            self._give(conn)
        if ack:
            count = found.pop()
            # NOTE: a command redirected (its WAIT refused on a primary just demoted) wrote
            # nothing here: it is followed, with a WAIT of its own there.
            if not any(isinstance(answer, REDIRECTED) for answer in found):
                if isinstance(count, redis.ResponseError):
                    raise count
                if count < self._replicas:
                    raise Unreplicated(f"{count} of {self._replicas} replicas acknowledged "
                                       "a write")
        return found[1::2] if asked else found

    def _take(self):
        """An idle connection, else ``_another()``; one to a primary of the past is closed
        first (its next command connects anew: ``redis_client._SentinelManaged``)."""
        if self._turns.waiting:
            conn = self._another()                 # behind those waiting
        else:
            try:
                conn = self._idle.pop()[0]         # PERF: the common case takes no lock
            except IndexError:
                conn = self._another()
        if getattr(conn, "stale", False):          # (a cluster's connections have none)
            conn.disconnect()
        return conn

    def _give(self, conn) -> None:
        """``conn`` back among the idle ones (closed once the store is), a waiter told."""
        if self._closed:
            self._dropped(conn)
        else:
            self._idle.append((conn, self._clock()))
            self._turns.tell()

    def _another(self):
        """An idle connection that came back meanwhile, or a new one (it connects at its
        first command) while fewer than ``max_open`` are open; when neither, or when others
        wait already, the first that comes in this caller's turn (``Turns``: first come,
        first served), at most ``wait_secs``."""
        conn = None if self._turns.waiting else self._free()
        if conn is None:
            conn = self._turns.wait(self._free, self._wait)
            if conn is None:
                raise redis.ConnectionError("every connection of the store is in use")
        return conn

    def _free(self):
        """An idle connection, or a new one while fewer than ``max_open`` are open; None."""
        with self._lock:
            try:
                return self._idle.pop()[0]
            except IndexError:
                pass
            if self._opened < self._max_open:
                self._opened += 1
                return self._make()
        return None

    def _dropped(self, conn) -> None:
        conn.disconnect()
        with self._lock:
            self._opened -= 1
        self._turns.tell()                      # one may be opened in its place

    def forked(self) -> None:
        """In a forked child (``forks``): none open, the parent's idle ones let go (redis-py
        closes the child's copy of each socket, never shutting the parent's), a lock of its
        own (``Turns`` makes its queue anew itself)."""
        idle, self._idle = self._idle, []
        self._lock = threading.Lock()
        self._opened = 0
        for conn, _ in idle:
            conn.disconnect()

    @property
    def idle(self) -> int:
        return len(self._idle)

    @staticmethod
    def _send(conn, commands, raising: bool = True) -> list:
        if _any_long(commands):
            conn.send_packed_command(_pieces(conn, commands))
        else:
            _write(conn, _packed(conn, commands))
        answers = []
        for _ in commands:
            try:
                answers.append(read(conn))
            except redis.ResponseError as ex:      # every answer read: the connection stays
                answers.append(ex)
        if not raising:
            return answers
        for answer in answers:
            if isinstance(answer, redis.ResponseError):
                raise answer
        return answers

    def script(self, source: str, durable: bool = False):
        """``source`` as ``run(keys=…, args=…, before=(), then=(), short=False)``, as
        ``client.register_script`` makes it: ``EVALSHA``, and ``EVAL`` once when Redis does
        not hold it (restarted, flushed). A ``durable`` script's writes are acknowledged by
        the replicas (``durable``); ``before`` and ``then``: commands sent before and after
        it (``after``); ``short``: the caller knows that no key or argument is longer than
        ``PIECE_CHARS`` (``Short``)."""
        sha = script_sha(source)
        kind = Short if len(source) <= PIECE_CHARS else tuple

        def run(keys=(), args=(), before=(), then=(), short=False):
            made = kind if short else tuple
            try:
                return self.after(before, made(("EVALSHA", sha, len(keys), *keys, *args)),
                                  durable, then)
            except redis.exceptions.NoScriptError:
                return self.after(before, made(("EVAL", source, len(keys), *keys, *args)),
                                  durable, then)
        return run

    def after(self, before, command: tuple, durable: bool = False, then=()):
        """``command``'s answer, sent after each of ``before`` (writes that must be done
        before it) and before each of ``then`` (writes that must follow it): on one
        connection, in one round trip, with its ``WAIT`` last when ``durable``. Every
        command of ``before`` and ``then`` may be sent again (a script Redis had forgotten
        is sent once more, with them)."""
        ack = (self._ack,) if durable and self._replicas else ()
        answers = self.several(*before, command, *then, *ack)
        if ack and answers[-1] < self._replicas:
            raise Unreplicated(f"{answers[-1]} of {self._replicas} replicas acknowledged a "
                               "write")
        return answers[len(before)]

    def prune(self) -> int:
        """Close the idle connections beyond ``keep`` that no call took for ``idle_secs``
        (the oldest first: a burst's connections go once it is over); how many closed."""
        cutoff = self._clock() - self._idle_secs
        closed = 0
        while len(self._idle) > self._keep and self._idle[0][1] < cutoff:
            try:
                conn, _ = self._idle.pop(0)
            except IndexError:
                break                              # taken meanwhile
            self._dropped(conn)
            closed += 1
        return closed

    def close(self) -> None:
        """Close the idle connections; one in use closes when its command returns."""
        self._closed = True
        while self._idle:
            self._dropped(self._idle.pop()[0])
