"""TaskContext talks to its AgentPort only; each application passes what it knows."""
from __future__ import annotations

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.agents import AgentPort, DataPart, Reply, TaskContext, TaskFailed, TextPart
from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.context import NO_DELEGATIONS, NO_INPUT
from tests.agents_util import response_of, tmp_home
from tests.conftest import Rpc
from tests.hub.conftest import HubClient, agent, close_hub, hub_config
from tests.shared import port_agents
from tests.tasks_util import send_params


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    port_agents.SEEN.clear()
    return tmp_home(tmp_path, monkeypatch)


class Recording(AgentPort):
    """A port that keeps every call."""

    def __init__(self):
        self.calls = []

    def cancelled(self):
        return False

    def on_cancel(self, waker):
        self.calls.append(("on_cancel",))

    def wait(self, seconds):
        self.calls.append(("wait", seconds))
        return False

    def progress(self, text):
        self.calls.append(("progress", text))

    def frame(self, name, text, fields):
        self.calls.append(("frame", name, text, fields))

    def artifact(self, artifact, append, last):
        self.calls.append(("artifact", artifact["artifactId"], append, last))

    def usage(self, report):
        self.calls.append(("usage", report))


def test_every_call_of_a_context_goes_to_its_port():
    port = Recording()
    ctx = TaskContext(port, task_id="tsk_1", context_id="ctx_1", text="hi",
                      conversation="stateless", owner="alpha", trust="trusted")
    ctx.progress("half")
    ctx.write("tok")
    ctx.wait(0.5)
    ctx.on_cancel(lambda: None)
    ctx.artifacts.add("notes", "n")
    ctx.usage(input_tokens=3, model="m")
    assert port.calls == [
        ("progress", "half"), ("frame", "text", "tok", {"text": "tok", "final": False}),
        ("wait", 0.5), ("on_cancel",), ("artifact", "notes", False, True),
        ("usage", (3, 0, 0, "m"))]
    assert (ctx.conversation, ctx.owner, ctx.trust) == ("stateless", "alpha", "trusted")
    assert ctx.record_event("note") == ""
    for call in (lambda: ctx.ask("q"), ctx.delegate, lambda: ctx.wait_completion("dlg_1"),
                 lambda: ctx.background("ls")):
        with pytest.raises(TaskFailed):
            call()


def test_the_door_gives_ask_the_typed_reply_and_its_conversation_mode():
    door = create_app({"name": "asks", "version": "0.1.0",
                       "lifecycle": {"conversation": "stateless"}}, agent=port_agents.asks)
    try:
        rpc = Rpc(door)
        task = rpc.result("SendMessage", send_params("hello"))["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        reply = {"messageId": "m-reply", "role": "ROLE_USER", "taskId": task["id"],
                 "parts": [{"text": "blue"}, {"data": {"hex": "#00f"}}],
                 "metadata": {"lang": "en"}}
        done = rpc.result("SendMessage", {"message": reply})["task"]
        ctx, got = port_agents.SEEN
        assert ctx.conversation == "stateless"
        assert isinstance(got, Reply)
        assert (got.message_id, got.task_id, got.metadata) == ("m-reply", task["id"],
                                                               {"lang": "en"})
        assert got.parts == (TextPart("blue", None), DataPart({"hex": "#00f"}, None))
        assert got.text.startswith("<untrusted-content source=task:event>\nblue\n")
        assert response_of(done) == "you said " + got.text
    finally:
        door.close()


def test_the_hub_passes_its_own_mode_and_refuses_input_and_delegations():
    config = hub_config()
    config["tenants"]["acme"]["agents"].update(
        asks=agent("tests.shared.port_agents:asks"),
        delegates=agent("tests.shared.port_agents:delegates"))
    hub = create_hub(config)
    try:
        task = HubClient(hub, "asks").send("hello")
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert task["status"]["message"]["parts"][0]["text"] == NO_INPUT
        (ctx,) = port_agents.SEEN
        assert (ctx.conversation, ctx.owner, ctx.trust, ctx.origin) == (
            "threaded", "acme", "untrusted", "a2a")
        assert ctx.message.text_parts == ["hello"]
        assert ctx.record_event("note") == ""
        task = HubClient(hub, "delegates").send("go")
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert task["status"]["message"]["parts"][0]["text"] == NO_DELEGATIONS
    finally:
        close_hub(hub)
