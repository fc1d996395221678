"""A stream's opening is bounded by its client's ordinary ``timeout`` (``headers_within``):
the bound is the calling greenlet's own, and holds a redirected opening too."""
from __future__ import annotations

import json
import time

import gevent
import gevent.event

from murmur_wsgi.client import A2AClient, ReadTimeout
from murmur_wsgi.client.deadline import headers_within, within
from tests.shared.hostile_server import Hostile, answer, card, run_in_thread

WAIT = 4.0


def test_each_greenlet_has_its_own_bound_and_gets_it_back():
    """Two greenlets' streams opening at once, the second entering after the first and
    leaving after it. With a ``threading.local`` made before gevent patched threading
    (or with threading left unpatched), the greenlets shared one bound: another
    greenlet's held send was cut at a stream's 2 s, and the overlap left 2 s behind for
    every later call of the thread."""
    entered, left = gevent.event.Event(), gevent.event.Event()
    seen = {}

    def first():
        with headers_within(2.0):
            entered.set()
            seen["first inside"] = within(None)
            left.wait(WAIT)
        seen["first after"] = within(None)

    def second():
        entered.wait(WAIT)
        seen["second before"] = within(None)
        with headers_within(5.0):
            left.set()
            gevent.sleep(0)     # wait-ok: a switch: the first greenlet leaves its block meanwhile
            seen["second inside"] = within(None)
        seen["second after"] = within(None)
    gevent.joinall([gevent.spawn(first), gevent.spawn(second)], timeout=WAIT,
                   raise_error=True)
    assert seen == {"first inside": 2.0, "second before": None, "second inside": 5.0,
                    "first after": None, "second after": None}
    assert within(None) is None and within(3.0) == 3.0


def test_a_streams_redirected_opening_ends_at_the_calls_timeout():
    """Each hop a redirect 0.4 s late, within the client's 1 s ``timeout``: the opening
    ends at that timeout, not at ``stream_timeout`` (before, the redirects were followed
    for ``stream_timeout``: 8 s for a client of 2 s)."""
    def redirects(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        server.stopping.wait(0.4)
        answer(conn, "307 Temporary Redirect", b"",
               extra=f"Location: {server.url}/r{len(server.requests)}\r\n")
    with Hostile(redirects) as door, \
            A2AClient(door.url, timeout=1.0, stream_timeout=WAIT * 4,
                      max_reconnects=0) as client:
        started = time.monotonic()
        finished, raised = run_in_thread(lambda: list(client.subscribe("tsk_1")), WAIT * 2)
        took = time.monotonic() - started
    assert finished and isinstance(raised, ReadTimeout), raised
    assert "redirected past it" in str(raised)
    assert took < WAIT, took
