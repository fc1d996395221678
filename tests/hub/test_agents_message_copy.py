"""The agent's own copy of a large message is made without the cyclic GC's passes.

The hub hands its agent a copy of the message (hub/methods/messages.py ``agents_copy``),
written to JSON and parsed back. The parse of a data part of many small arrays made a
container every few bytes, and the cyclic GC ran every 700 of them over all that
survived: 0.13-0.54 s for a 1 MB body that the default limits accept, against 0.04-0.1 s
with the GC paused, as the request's own parse already has it (serving/envelope.py).
"""
from __future__ import annotations

import gc
import threading

from murmur_wsgi.hub.methods.messages import agents_copy


def chain(levels: int):
    value = 0
    for _ in range(levels):
        value = [value]
    return value


def test_the_copy_of_a_large_message_runs_no_collection_meanwhile():
    data = [[] for _ in range(300_000)] + [chain(30) for _ in range(1_000)]
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": data}]}
    collections = []
    copying = threading.get_ident()

    def note(phase, info):
        # NOTE: a collection runs in the thread whose allocation set it off: another
        # thread's (one a test before left running in this process) is not the copy's.
        if phase == "start" and threading.get_ident() == copying:
            collections.append(info["generation"])

    was_enabled = gc.isenabled()
    gc.enable()
    gc.callbacks.append(note)
    try:
        own, own_data = agents_copy(message, [data])
    finally:
        gc.callbacks.remove(note)
        if not was_enabled:
            gc.disable()
    assert len(collections) <= 1        # the one due once the GC is back on (471 before)
    assert gc.isenabled()
    assert own == message and own_data == [data]
    assert own_data[0] is own["parts"][0]["data"] and own_data[0] is not data
    own_data[0][0].append(1)
    assert data[0] == []
