"""An agent whose run does not wait (``agent.inline``) runs in a held SendMessage's thread."""
from __future__ import annotations

import logging
import threading

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.agents.demo import demo_agent
from murmur_wsgi.door.tasks.render import strip_untrusted_fence as plain, wrap_untrusted
from tests.agents_util import tmp_home
from tests.conftest import Rpc
from tests.tasks_util import (DEADLINE, NOW, send_params, strip_volatile, wait_state,
                              wait_until)

MANIFEST = {"name": "inline-agent", "version": "0.1.0",
            "lifecycle": {"task_acceptance": "queue", "queue_depth": 10}}


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


class Recorder:
    """An agent noting the thread each run was on; ``inline`` as given."""

    def __init__(self, inline=None):
        self.threads: dict[str, int] = {}
        if inline is not None:
            self.inline = inline

    def __call__(self, ctx):
        self.threads[plain(ctx.text)] = threading.get_ident()
        return f"echo: {ctx.text}"


def serve(agent):
    door = create_app(MANIFEST, agent=agent)
    return Rpc(door)


def held(rpc, text):
    return rpc.result("SendMessage", send_params(text))["task"]


def test_a_held_message_runs_an_inline_agent_in_its_own_thread_and_answers_the_same():
    inline, threaded = Recorder(inline=True), Recorder()
    answers = []
    for agent in (inline, threaded):
        rpc = serve(agent)
        answers.append(strip_volatile(held(rpc, "hi")))
        rpc.door.close()
    assert inline.threads["hi"] == threading.get_ident()
    assert threaded.threads["hi"] != threading.get_ident()
    assert answers[0] == answers[1]
    assert answers[0]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_an_answer_given_at_once_never_runs_the_agent_in_the_request():
    agent = Recorder(inline=True)
    rpc = serve(agent)
    task = rpc.result("SendMessage", send_params("now", configuration=NOW))["task"]
    wait_state(rpc.door, task["id"], "TASK_STATE_COMPLETED")
    assert agent.threads["now"] != threading.get_ident()
    rpc.door.close()


def test_the_hook_is_asked_with_the_text_and_a_failing_hook_means_a_thread(caplog):
    def hook(text):
        if plain(text) == "boom":
            raise RuntimeError("hook bug")
        return plain(text) == "quick"

    agent = Recorder(inline=hook)
    rpc = serve(agent)
    for text in ("quick", "slow", "boom"):
        assert held(rpc, text)["status"]["state"] == "TASK_STATE_COMPLETED"
    assert agent.threads["quick"] == threading.get_ident()
    assert agent.threads["slow"] != threading.get_ident()
    assert agent.threads["boom"] != threading.get_ident()
    assert any("inline hook failed" in r.getMessage() for r in caplog.records
               if r.levelno == logging.ERROR)
    rpc.door.close()


class RaisingInline(Recorder):
    """An agent whose ``inline`` is a property that raises."""

    @property
    def inline(self):
        raise RuntimeError("inline property bug")


def test_an_inline_attribute_that_raises_means_a_thread_and_the_task_runs(caplog):
    agent = RaisingInline()
    rpc = serve(agent)
    task = held(rpc, "hi")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert agent.threads["hi"] != threading.get_ident()
    assert any("inline hook failed" in r.getMessage() for r in caplog.records
               if r.levelno == logging.ERROR)
    assert held(rpc, "again")["status"]["state"] == "TASK_STATE_COMPLETED"
    rpc.door.close()


def test_a_queued_task_starts_on_its_own_thread_once_the_slot_is_free():
    release = threading.Event()
    seen = {}

    def agent(ctx):
        seen[plain(ctx.text)] = threading.get_ident()
        if plain(ctx.text) == "slow":
            assert release.wait(DEADLINE)
        return ctx.text

    agent.inline = lambda text: plain(text) == "quick"
    rpc = serve(agent)
    slow = rpc.result("SendMessage", send_params("slow", configuration=NOW))["task"]
    wait_state(rpc.door, slow["id"], "TASK_STATE_WORKING")
    answer, sender = {}, []

    def send():
        sender.append(threading.get_ident())
        answer.update(Rpc(rpc.door).result("SendMessage", send_params("quick"))["task"])

    thread = threading.Thread(target=send)
    thread.start()
    manager = rpc.door.session.manager
    wait_until(rpc.door, lambda: len(manager._queue) == 1)
    release.set()
    thread.join(DEADLINE)
    assert answer["status"]["state"] == "TASK_STATE_COMPLETED"
    assert seen["quick"] not in (sender[0], threading.get_ident())
    rpc.door.close()


@pytest.mark.parametrize("text, inline", [
    ("hi", True), ("/stream 3", True), ("/fail no", True), ("/tool t", True),
    ("/sleep 1", False), ("/ask what?", False), ("/background sleep 1", False),
])
def test_the_demo_agent_runs_inline_unless_its_directive_waits(text, inline):
    assert demo_agent.inline(text) is inline
    assert demo_agent.inline(wrap_untrusted("event", text)) is inline
