"""What a run holds of the text it streamed and stored, on Redis: the text, no more.

The memory store's log keeps each stored event in the worker, and a run refers to its
stored pieces there (``run_text.Carried``) at no cost. On Redis nothing in the worker keeps
a stored event once it is sent: a run that kept its pieces as those events held their JSON
escapes too (an ESC is six characters, a newline two) and their ids: 1.85 times the text
of a terminal's output.
"""
from __future__ import annotations

import sys

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.run_text import Carried

from tests.hub.agents import TERMINAL, gate
from tests.hub.conftest import HubClient, agent, close_hub, hub_config, wait_until


def _held(tokens) -> int:
    """The bytes the run's tokens keep alive (a Carried keeps its event)."""
    return sum(sys.getsizeof(t.payload if isinstance(t, Carried) else t) for t in tokens)


def test_a_run_on_redis_holds_no_more_than_the_text_it_streamed(redis_server):
    redis_server.flush()
    config = hub_config(store=redis_server.url, events={"merge_secs": 0.01})
    config["tenants"]["acme"]["agents"]["terminal"] = agent(
        "tests.hub.agents:terminal_then_waits")
    hub = create_hub(config)
    name = "run-text-terminal"
    try:
        rpc = HubClient(hub, "terminal")
        task = rpc.send(name, configuration={"returnImmediately": True})

        def stored():
            run = hub.runs.get(task["id"])
            return run is not None and run.tokens and run.stored == len(run.tokens)
        wait_until(stored)
        run = hub.runs.get(task["id"])
        with run.lock:
            held = _held(run.tokens)
        assert held <= 1.1 * sys.getsizeof(TERMINAL), (held, sys.getsizeof(TERMINAL))
    finally:
        gate(name).set()
        close_hub(hub)
