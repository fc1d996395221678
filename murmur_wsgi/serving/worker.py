"""The gevent worker both applications run on: read deadlines, a reserve, write cuts.

Each application's worker (``door/worker.py``, ``hub/worker.py``) subclasses
``DeadlineWorker`` and says its deadlines (``deadlines()``: the door's from
its manifest, the hub's from hub.yaml) and where a cut is counted
(``count_cut()``). It imports gevent, so only gunicorn's worker process loads
it (never the package, never the master); a subclass imports its application
when the worker asks (gunicorn loaded it in the worker process by then), so
the master, which loads the class, imports none of it.

What it adds to gunicorn's gevent worker, per connection:

- **Header deadline.** A new connection has ``limits.header_timeout_secs``
  from its accept to the end of its request's headers; a kept-alive one waits
  up to gunicorn's ``keepalive`` for the first byte of its next request, then
  has the header deadline for the rest.
- **Body deadline.** A request that declares a body has
  ``limits.body_timeout_secs`` from the end of its headers until the
  application has read the whole body.
- **A reserve.** When the open connections reach the worker's capacity
  (``worker_connections``, or the descriptors left) less a tenth, the
  connections waiting longest for a request's headers are closed, oldest first:
  a flood of idle connections cannot keep a ready request from being accepted.
- **Write deadline.** The application sets it on the socket (``writes.py``); a
  write that runs past it is a cut here: logged once, not as a socket error.
- **Turns.** A connection whose client always has the next bytes ready (a
  body of one-byte chunks, requests pipelined without end) never waits on its
  socket, so it would never give the loop a turn: no other connection would be
  answered, no deadline would fire, and gunicorn's arbiter would kill the
  worker (its heartbeat starved) at its ``timeout``. Such a connection yields to
  the loop once it has run ``TURN_SECS`` since the loop last ran, at its
  parser's reads and before each request.
- **Boot objects frozen.** Once the application is loaded and the worker set up,
  the boot's garbage is collected and what is left (modules, configuration, the
  application) is moved to the cyclic GC's permanent generation
  (``frozen_boot``): a full collection no longer walks it.
- **No body discarded.** An answer that leaves the request's body unread (a
  413 for a body over ``limits.max_body_bytes``, or a refusal before the body
  is read) closes the connection once it is written (``Connection: close``),
  instead of reading the rest of the body, of any size, to find the next request.

A cut shuts the connection's socket (the blocked read sees the end, gunicorn
closes it quietly) and is counted (``count_cut``; the door's is
``murmur_connections_cut_total{reason}`` on ``/metrics``).

Concurrency: everything runs on the worker's one gevent loop; the deadlines are
the loop's timers, whose callbacks never block. A check watcher counts the loop's
iterations (PERF: one Python call each, a few per request), which tells a
connection whether the loop ran since it last looked. A kept-alive connection's first
byte is seen where gunicorn reads it (its parser's reads, wrapped per
connection): a read watcher beside gunicorn's own missed the bytes its read
took before the loop polled (a greenlet held up between the two, under load),
and the connection then waited out ``keepalive`` instead of the header deadline.
"""
from __future__ import annotations

import gc
import resource
import time

import gevent
from gevent import getcurrent
from gunicorn.workers.ggevent import GeventWorker

from murmur_wsgi.serving.connection import shut

HEADER_TIMEOUT, BODY_TIMEOUT = 10.0, 30.0       # limits.header_timeout_secs, body_timeout_secs
FD_MARGIN = 64                  # descriptors kept for files, pipes and agents' processes
TURN_SECS = 0.01                # the longest a connection runs before the loop gets a turn
YIELD_SECS = 1e-4               # its yield: due at once, run once the loop has polled


def _body_pending(req) -> bool:
    """True while the request's declared body is not read to its end."""
    reader = getattr(getattr(req, "body", None), "reader", None)
    if reader is None:
        return False
    if hasattr(reader, "length"):
        return reader.length > 0                # Content-Length
    return getattr(reader, "parser", None) is not None     # chunked: None once at the end


def _buffered(req) -> bool:
    """True when the parser already holds bytes past this request (the next one's start)."""
    buf = getattr(getattr(req, "unreader", None), "buf", None)
    return buf is not None and buf.getbuffer().nbytes > 0


class _Connection:
    """One client connection's deadline (a loop timer), and whether it waits kept alive."""

    __slots__ = ("sock", "since", "timer", "idle", "reads", "cut", "req", "turn", "turn_at")

    def __init__(self, sock):
        self.sock = sock
        self.since = time.monotonic()
        self.timer = None
        self.idle = False           # kept alive, no byte of its next request read yet
        self.reads = None           # the parser's reads, once wrapped (_watch_reads)
        self.cut = None             # the reason, once cut
        self.req = None
        self.turn = -1              # the loop's iteration this connection last ran in
        self.turn_at = 0.0          # and the monotonic time it first ran in it

    def disarm(self) -> None:
        self.idle = False
        timer, self.timer = self.timer, None
        if timer is not None:
            timer.stop()
            timer.close()


def untracked_greenlets() -> None:
    """Greenlets made from now on do not record the stack and greenlet that spawned them.

    PERF: gevent records both for its debugging tools (``gevent.util``'s run info and
    greenlet tree) unless ``track_greenlet_tree`` is off: a walk of the spawner's frames
    at every spawn, each connection's greenlet and each run of the hub's (its agent's
    thread). Off, a blocking SendMessage to the hub on the memory store executes about
    3 % fewer instructions (docs/performance.md). Nothing here reads them.
    """
    gevent.config.track_greenlet_tree = False


def frozen_boot() -> None:
    """Collect the boot's garbage, then freeze what is left out of the cyclic GC's walks.

    PERF: every request of a worker waits while a full (generation 2) collection walks
    every tracked object; after the hub's boot they are about 44,000 (modules, their
    functions and classes, the configuration, the application), a 15-110 ms walk on a
    shared 2-core machine. Frozen, they are never walked again: under a load of small
    requests and 1 MB messages a full collection took 15 ms on average, against 46 ms
    (docs/performance.md). Collected first, the boot's garbage is not kept: the worker's
    RSS is the same. Only gunicorn's worker does it: an application mounted elsewhere
    leaves the collector to its host.
    """
    gc.collect()
    gc.freeze()


class DeadlineWorker(GeventWorker):
    """gunicorn's gevent worker with read deadlines and a connection reserve.

    A subclass passes its application's ``limits`` block (``limits()``: its
    ``header_timeout_secs`` and ``body_timeout_secs``, the defaults where
    absent) and counts cuts in ``count_cut()``; both are asked after the
    application is loaded.
    """

    def limits(self) -> dict:
        """The loaded application's ``limits`` block."""
        return {}

    def deadlines(self) -> tuple[float, float]:
        """``(header_timeout, body_timeout)`` in seconds."""
        limits = self.limits()
        return (limits.get("header_timeout_secs", HEADER_TIMEOUT),
                limits.get("body_timeout_secs", BODY_TIMEOUT))

    def count_cut(self, reason: str) -> None:
        """A connection was cut for ``reason`` (header_timeout, body_timeout, write_timeout,
        reserve)."""

    def init_process(self):
        untracked_greenlets()
        super().init_process()

    def run(self):
        self._configure()
        frozen_boot()
        super().run()

    def handle_quit(self, sig, frame):
        """SIGINT or SIGQUIT (Ctrl-C): stop as the run loop stops, with no SystemExit.

        gunicorn's own ends in ``sys.exit(0)`` inside a greenlet, which gevent prints as
        a traceback; here the loop ends, the servers stop (within ``graceful_timeout``,
        the arbiter's bound too) and ``worker_int`` closes the doors and hubs first.
        """
        gevent.spawn(self._quit)

    def _quit(self) -> None:
        self.alive = False
        self.cfg.worker_int(self)

    def load_wsgi(self):
        super().load_wsgi()
        self.wsgi = self._closing_unread(self.wsgi)

    def _closing_unread(self, app):
        """``app``, whose answers close the connection when they leave the body unread."""
        def wsgi(environ, start_response):
            def start(status, headers, exc_info=None):
                conn = self._connections.get(getcurrent())
                if conn is not None and conn.req is not None and _body_pending(conn.req):
                    conn.req.must_close = True      # gunicorn writes Connection: close
                return start_response(status, headers, exc_info)
            return app(environ, start)
        return wsgi

    def _configure(self) -> None:
        self.header_timeout, self.body_timeout = self.deadlines()
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        capacity = self.worker_connections
        if soft != resource.RLIM_INFINITY:
            capacity = max(1, min(capacity, soft - FD_MARGIN))
        self.capacity = capacity
        self.threshold = capacity - max(1, capacity // 10)
        self._loop = gevent.get_hub().loop
        self._connections: dict = {}        # greenlet -> _Connection
        self._waiting: dict = {}            # socket -> _Connection, waiting longest first
        self._cut_open = 0                  # cut, not yet closed by their greenlet
        self._turns = 0                     # the loop's iterations (_share)
        self._turner = self._loop.check(ref=False)
        self._turner.start(self._turned)
        self.log.info("murmur-wsgi: header deadline %ss, body deadline %ss, capacity %d "
                      "connections (reserve from %d)", self.header_timeout, self.body_timeout,
                      capacity, self.threshold)

    # --- gunicorn's calls -----------------------------------------------------------

    def handle(self, listener, client, addr):
        self._make_room()
        conn = _Connection(client)
        self._connections[getcurrent()] = conn
        self._wait(conn, first=True)
        try:
            super().handle(listener, client, addr)
        finally:
            conn.disarm()
            self._waiting.pop(client, None)
            self._connections.pop(getcurrent(), None)
            if conn.cut is not None:
                self._cut_open -= 1

    def timeout_ctx(self):
        # NOTE: the connection's own deadlines (below) replace gunicorn's keepalive timeout.
        return gevent.Timeout(None)

    def handle_request(self, listener_name, req, sock, addr):
        conn = self._connections.get(getcurrent())
        if conn is not None:
            conn.disarm()
            self._waiting.pop(sock, None)
            self._share(conn)           # NOTE: disarmed: its headers came within their deadline
            conn.req = req
            if conn.reads is None and getattr(req, "unreader", None) is not None:
                self._watch_reads(conn, req.unreader)
            if _body_pending(req):
                self._arm(conn, self.body_timeout, self._body_late)
        try:
            return super().handle_request(listener_name, req, sock, addr)
        except TimeoutError:
            # A write ran past stream.write_timeout_secs (writes.py): the client is cut.
            self.count_cut("write_timeout")
            self.log.info("murmur-wsgi: cut a client that did not take a write within the "
                          "write deadline (%s)", addr[0] if addr else "?")
            raise StopIteration() from None
        finally:
            if conn is not None:
                conn.disarm()
                self._wait(conn, first=False)
                conn.req = None

    # --- deadlines --------------------------------------------------------------------

    def _arm(self, conn: _Connection, seconds: float, callback) -> None:
        timer = self._loop.timer(seconds, 0.0, ref=False)
        timer.start(callback, conn)
        conn.timer = timer

    def _wait(self, conn: _Connection, first: bool) -> None:
        """The connection waits for a request: the header deadline (kept alive: first byte)."""
        conn.since = time.monotonic()
        self._waiting[conn.sock] = conn
        # NOTE: bytes already read ahead are the next request's start: its headers have begun.
        if first or _buffered(conn.req):
            self._arm(conn, self.header_timeout, self._headers_late)
            return
        self._arm(conn, self.cfg.keepalive or self.header_timeout, self._idle_ended)
        conn.idle = True

    def _watch_reads(self, conn: _Connection, unreader) -> None:
        """Wrap the connection's parser's reads (its ``chunk``): a read that returns bytes
        while the connection waits kept alive is its next request's first byte, and each
        read may yield (``_share``). Once the connection is cut, a read is its end: the
        bytes a client sent before the cut, still in the socket, are not parsed."""
        read = conn.reads = unreader.chunk

        def chunk(*args, **kwargs):
            if conn.cut is not None:
                return b""          # cut: what the socket still holds is not read
            data = read(*args, **kwargs)
            if data:
                if conn.idle:
                    self._first_byte(conn)
                self._share(conn)
            return data

        unreader.chunk = chunk

    def _share(self, conn: _Connection) -> None:
        """Yield to the loop when this connection has run ``TURN_SECS`` since it last ran.

        A read that finds its bytes ready, and a write that finds room, return without
        a switch. ``_turns`` counts the loop's iterations (``_turned``): while it stays
        the same, this greenlet has kept the loop since it first saw that count. (The
        loop's ``now()`` is no such count: starting a timeout updates it.)
        PERF: a connection that waits as a client's do pays a clock read a request.
        """
        turns = self._turns
        if turns != conn.turn:
            conn.turn, conn.turn_at = turns, time.monotonic()
        elif time.monotonic() - conn.turn_at >= TURN_SECS:
            # NOTE: a timer, not sleep(0): a greenlet that sleeps 0 inside the loop's run
            # of its callbacks is run again in that same run, before the loop polls.
            gevent.sleep(YIELD_SECS)
            conn.turn, conn.turn_at = self._turns, time.monotonic()

    def _turned(self) -> None:
        """The loop's check watcher: one more iteration of the loop."""
        self._turns += 1

    def _first_byte(self, conn: _Connection) -> None:
        conn.disarm()
        self._arm(conn, self.header_timeout, self._headers_late)

    def _idle_ended(self, conn: _Connection) -> None:
        self._cut(conn, None)                   # keepalive ended: a close, not a cut

    def _headers_late(self, conn: _Connection) -> None:
        self._cut(conn, "header_timeout")

    def _body_late(self, conn: _Connection) -> None:
        req = conn.req
        conn.disarm()
        if req is not None and _body_pending(req):
            self._cut(conn, "body_timeout")

    def _make_room(self) -> None:
        """Near capacity: close the connections waiting longest for their headers."""
        excess = len(self._connections) - self._cut_open - self.threshold + 1
        while excess > 0 and self._waiting:
            conn = next(iter(self._waiting.values()))
            self._cut(conn, "reserve")
            excess -= 1

    def _cut(self, conn: _Connection, reason: str | None) -> None:
        conn.disarm()
        self._waiting.pop(conn.sock, None)
        if conn.cut is not None:
            return
        conn.cut = reason or "idle"
        self._cut_open += 1
        if reason is not None:
            self.count_cut(reason)
        shut(conn.sock)
