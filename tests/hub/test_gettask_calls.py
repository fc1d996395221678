"""What a GetTask costs the hub above its store, counted: calls of the hub's Python functions.

Each call of a Python function is about 700 instructions of a worker's CPU, more than
most of the checks it makes (docs/performance.md, ``make bench-instructions``): a
GetTask is the hub's cheapest request, and the steps around its one store read are
most of what it pays above its floor. Counted with ``sys.setprofile`` for one request;
the store's own calls (its read) are not counted here, nor Werkzeug's.
"""
from __future__ import annotations

import os
import sys

import murmur_wsgi

from tests.hub.conftest import HubClient

PACKAGE = os.path.dirname(murmur_wsgi.__file__) + os.sep
STORE = os.path.join(PACKAGE, "hub", "store") + os.sep
# The steps of a GetTask without historyLength, from the WSGI call to its answer.
MOST_CALLS = 19


def _hub_calls(action) -> list[str]:
    """The hub's own Python functions (not its store's, nor those its store calls) that ``action()`` called, in order."""
    calls: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            name = frame.f_code.co_filename
            caller = frame.f_back.f_code.co_filename if frame.f_back else ""
            if name.startswith(PACKAGE) and not (name.startswith(STORE)
                                                 or caller.startswith(STORE)):
                calls.append(f"{name[len(PACKAGE):]}:{frame.f_code.co_name}")
    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls


def test_a_get_task_makes_few_calls_above_its_store(hub):
    rpc = HubClient(hub)
    task = rpc.send("hi")
    rpc.result("GetTask", {"id": task["id"]})            # the first of its kind: warm
    answers = []
    calls = _hub_calls(lambda: answers.append(rpc.result("GetTask", {"id": task["id"]})))
    assert answers == [task]
    assert len(calls) <= MOST_CALLS, "\n".join(calls)
