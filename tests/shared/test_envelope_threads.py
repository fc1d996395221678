"""Parsing large bodies in real threads (Werkzeug's threaded servers, a threaded WSGI stack)
leaves the process's cyclic GC as it found it.

A body of ``_GC_PAUSE_BYTES`` or more is parsed with the GC off. The interleaving that
matters is forced with events, in the threads at the moment that matters: deterministic.
"""
from __future__ import annotations

import gc
import threading

from murmur_wsgi.serving import envelope

BODY = b'{"pad":"' + b"p" * 9000 + b'"}'       # past the GC pause


class _Switch:
    """``gc``'s switch as envelope.py sees it: the second parse's ``disable`` waits until the
    first parse has returned."""

    def __init__(self, second):
        self.second = second
        self.first_in, self.arrived = threading.Event(), threading.Event()
        self.first_done = threading.Event()

    isenabled = staticmethod(gc.isenabled)
    enable = staticmethod(gc.enable)

    def disable(self):
        if threading.current_thread() is self.second:
            self.arrived.set()
            self.first_done.wait(10)
        gc.disable()


def test_two_large_bodies_parsed_at_once_leave_the_gc_on(monkeypatch):
    """The first parse turns the GC off; the second reads it off meanwhile and turns it off
    once the first turned it back on: it stayed off for the process's life."""
    decode = envelope._decode_text
    found = {}

    def decode_once_both_came(body, scan):
        if threading.current_thread() is first:
            switch.first_in.set()
            assert switch.arrived.wait(10), "the second parse did not come"
        else:
            switch.arrived.set()
        return decode(body, scan)

    def parse(name):
        found[name] = envelope.parse_json(BODY)
        if name == "first":
            switch.first_done.set()

    first = threading.Thread(target=parse, args=("first",))
    second = threading.Thread(target=parse, args=("second",))
    switch = _Switch(second)
    monkeypatch.setattr(envelope, "gc", switch)
    monkeypatch.setattr(envelope, "_decode_text", decode_once_both_came)
    assert gc.isenabled()
    try:
        first.start()
        assert switch.first_in.wait(10), "the first parse did not begin"
        second.start()
        first.join(10)
        second.join(10)
        assert found == {"first": {"pad": "p" * 9000}, "second": {"pad": "p" * 9000}}
        assert gc.isenabled()
    finally:
        gc.enable()


def test_a_gc_the_embedding_turned_off_stays_off():
    gc.disable()
    try:
        assert envelope.parse_json(BODY) == {"pad": "p" * 9000}
        assert not gc.isenabled()
    finally:
        gc.enable()
