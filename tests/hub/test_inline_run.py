"""An agent whose run does not wait (``agent.inline``) runs in a blocking SendMessage's
thread; every other run (a stream, returnImmediately, a hook that declines or fails) on a
thread of its own. On both stores."""
from __future__ import annotations

import logging
import threading
import time

import pytest

from murmur_wsgi.hub import create_hub
from tests.hub import inline_agents
from tests.hub.conftest import HubClient, agent, close_hub, hub_config, send_params, wait_until

AGENTS = {"inline": "says_inline", "threaded": "says_nothing", "hook": "hook_fails",
          "per-text": "asks_per_text", "exits": "exits", "writes": "writes_on"}


@pytest.fixture
def rpc(store, request):
    config = hub_config(store=store)
    config["limits"].update(getattr(request, "param", {}))
    config["tenants"]["acme"]["agents"].update(
        {name: agent(f"tests.hub.inline_agents:{ref}") for name, ref in AGENTS.items()})
    h = create_hub(config)
    inline_agents.THREADS.clear()
    inline_agents.KEYS.clear()
    yield HubClient(h)
    close_hub(h)


def ran_here(name: str, text: str) -> bool:
    return inline_agents.THREADS[f"{name}:{text}"] == threading.get_ident()


def answer_of(task: dict) -> dict:
    """The task without what differs from one run to the next (ids, times)."""
    return {"state": task["status"]["state"],
            "parts": task["artifacts"][0]["parts"],
            "history": [part for m in task["history"] for part in m["parts"]]}


def test_a_run_takes_its_turns_as_its_tenant_inline_or_on_its_thread(rpc):
    """Its writes take turns with its tenant's other long steps, not as a step of nobody."""
    rpc.send("hi", agent="inline")
    rpc.send("hi", agent="threaded")
    wait_until(lambda: "threaded:hi" in inline_agents.KEYS)
    assert inline_agents.KEYS == {"inline:hi": "acme", "threaded:hi": "acme"}


def test_a_blocking_message_runs_an_inline_agent_in_its_thread_and_answers_the_same(rpc):
    inline = rpc.send("hi", agent="inline")
    threaded = rpc.send("hi", agent="threaded")
    assert ran_here("inline", "hi") and not ran_here("threaded", "hi")
    assert answer_of(inline) == answer_of(threaded)
    assert inline["status"]["state"] == "TASK_STATE_COMPLETED"
    assert inline["artifacts"][0]["parts"][0]["text"] == "echo: hi"
    got = rpc.result("GetTask", {"id": inline["id"]}, agent="inline")
    assert got["status"] == inline["status"] and got["artifacts"] == inline["artifacts"]


def test_a_message_answered_at_once_or_streamed_runs_on_its_own_thread(rpc):
    params = send_params("now", configuration={"returnImmediately": True})
    task = rpc.result("SendMessage", params, agent="inline")["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    response = rpc.call("SendStreamingMessage", send_params("stream"), agent="inline")
    assert b"TASK_STATE_COMPLETED" in response.get_data()
    assert not ran_here("inline", "stream")
    # the answer given at once: its run ended on its own thread too
    wait_until(lambda: "inline:now" in inline_agents.THREADS)
    assert not ran_here("inline", "now")


def test_the_hook_is_asked_with_the_text_and_a_failing_hook_means_a_thread(rpc, caplog):
    rpc.send("go", agent="per-text")
    rpc.send("wait", agent="per-text")
    assert ran_here("per-text", "go") and not ran_here("per-text", "wait")
    with caplog.at_level(logging.ERROR, logger="murmur_wsgi.agents.inline"):
        task = rpc.send("hi", agent="hook")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert not ran_here("hook", "hi")
    assert "the agent's inline hook failed" in caplog.text


def test_an_inline_agent_that_exits_fails_its_task_and_the_hub_answers(rpc, caplog):
    with caplog.at_level(logging.ERROR):
        task = rpc.send("bye", agent="exits")
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "the agent was stopped" in caplog.text
    assert rpc.send("hi", agent="inline")["status"]["state"] == "TASK_STATE_COMPLETED"


def test_an_inline_run_is_answered_without_waiting_on_it(rpc, monkeypatch):
    """Its run has ended when the agent returns: the held request reads the answer at once
    (no wait on the run, no lock); a run on its own thread is waited for."""
    from murmur_wsgi.hub.runs import Run

    waited = []
    wait = Run.wait

    def counted(self, predicate, timeout):
        waited.append(self.agent_name)
        return wait(self, predicate, timeout)
    monkeypatch.setattr(Run, "wait", counted)
    assert rpc.send("hi", agent="inline")["status"]["state"] == "TASK_STATE_COMPLETED"
    assert waited == []
    assert rpc.send("hi", agent="threaded")["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "threaded" in waited


class CountedRLock:
    """An RLock that counts its acquisitions (the reentrant ones too)."""

    def __init__(self):
        self._lock = threading.RLock()
        self.acquired = 0

    def acquire(self, *args, **kwargs):
        self.acquired += 1
        return self._lock.acquire(*args, **kwargs)

    __enter__ = acquire

    def release(self):
        self._lock.release()

    def __exit__(self, *exc):
        self.release()

    def _is_owned(self):
        return self._lock._is_owned()

    def _release_save(self):
        return self._lock._release_save()

    def _acquire_restore(self, state):
        self._lock._acquire_restore(state)


def test_a_run_that_ends_inline_makes_no_condition_and_takes_its_lock_few_times(rpc,
                                                                              monkeypatch):
    """Nobody waits on a blocking SendMessage's run that ends inline: it makes no Condition
    and notifies none; its lock is taken once, for its end (which marks its agent returned
    and gives its slot back under it: docs/performance.md), and once more on Redis, to
    close the run once the store wrote it: the store's round trip is made without it (a
    store that stalls holds no CancelTask waiting on the run)."""
    from murmur_wsgi.hub import runs

    made = {"conditions": 0, "locks": []}

    class Counting:
        def __getattr__(self, name):
            return getattr(threading, name)

        def RLock(self):                    # noqa: N802 - threading's name
            made["locks"].append(CountedRLock())
            return made["locks"][-1]

        def Condition(self, lock=None):     # noqa: N802 - threading's name
            made["conditions"] += 1
            return threading.Condition(lock)

    monkeypatch.setattr(runs, "threading", Counting())
    task = rpc.send("hi", agent="inline")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and ran_here("inline", "hi")
    assert made["conditions"] == 0
    assert [lock.acquired for lock in made["locks"]] == [1 + rpc.hub.store.shared]


@pytest.mark.parametrize("rpc", [{"run_timeout_secs": 0.5}], indirect=True)
def test_an_inline_run_that_writes_without_end_is_stopped_at_its_run_timeout(rpc):
    # NOTE: before, an inline run had no run timeout: this one wrote until
    # limits.max_output_bytes (64 MiB of 16-character writes: about 20 s here) stopped it.
    # It gives way every 10 ms of writes (murmur_wsgi/turns.py), and its first turn arms the
    # timeout, from the run's start.
    started = time.monotonic()
    task = rpc.send("go", agent="writes")
    assert ran_here("writes", "go")
    assert task["status"]["state"] == "TASK_STATE_FAILED", task["status"]
    assert task["status"]["message"]["parts"][0]["text"] == \
        "the run took longer than 0.5 s and was stopped"
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("rpc", [{"run_timeout_secs": 0.3}], indirect=True)
@pytest.mark.parametrize("immediately", [False, True], ids=["inline", "threaded"])
def test_a_run_timeout_ends_the_task_before_it_stops_the_agent(rpc, immediately, monkeypatch):
    # NOTE: before, the timeout stopped the agent first: its next write was refused and its
    # thread could end the task CANCELED before the timeout FAILED it (seen under load).
    from murmur_wsgi.hub.runs import Run

    stops = []
    request_stop = Run.request_stop

    def recorded(run, cancel):
        stops.append((run.task_id, cancel, run.ended))
        return request_stop(run, cancel)

    monkeypatch.setattr(Run, "request_stop", recorded)
    params = send_params("go", configuration={"returnImmediately": immediately})
    task = rpc.result("SendMessage", params, agent="writes")["task"]
    wait_until(lambda: rpc.result("GetTask", {"id": task["id"]}, agent="writes")["status"][
        "state"] == "TASK_STATE_FAILED")
    # (this task's: another test's hub may stop its own runs meanwhile; the stop follows
    # the end, on the timeout's thread)
    wait_until(lambda: any(stop[0] == task["id"] for stop in stops))
    assert [stop[1:] for stop in stops if stop[0] == task["id"]][:1] == [(False, True)]


@pytest.mark.parametrize("rpc", [{"run_timeout_secs": 0.3}], indirect=True)
def test_a_run_timeout_whose_end_fails_still_stops_the_agent(rpc, monkeypatch, caplog):
    # NOTE: the end first, then the stop: an end that raised (not the store's failure,
    # which it handles) left the agent writing until limits.max_output_bytes stopped it.
    from murmur_wsgi.hub.runs import Run

    finish = Run.finish

    def failing(run, state, text=None, **kwargs):
        if text is not None and text.startswith("the run took longer"):
            raise RuntimeError("an end that failed")
        return finish(run, state, text, **kwargs)

    monkeypatch.setattr(Run, "finish", failing)
    params = send_params("go", configuration={"returnImmediately": True})
    task = rpc.result("SendMessage", params, agent="writes")["task"]
    with caplog.at_level(logging.ERROR):
        wait_until(lambda: rpc.result("GetTask", {"id": task["id"]}, agent="writes")[
            "status"]["state"] == "TASK_STATE_CANCELED")
