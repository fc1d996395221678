"""The project's client and CLI against a2a-sdk's own server, in a real process.

tests/e2e/sdk_server.py: the SDK's ``DefaultRequestHandler`` and Starlette routes
under uvicorn (``a2a-sdk[http-server]`` and ``uvicorn``). Every command a plain
A2A server supports works there: ``card``, ``send`` (held, ``--no-wait``,
``--stream``), ``get``, ``ps``, ``subscribe``, ``cancel``; ``watch``, a Murmur
door's own method, says the server does not serve it.
"""
from __future__ import annotations

import json
import sys
import threading
import time

import pytest

from murmur_wsgi.client import A2AClient, TaskNotFound
from tests.e2e.cli_util import check_send_ps_cancel, no_ambient_agent, run_cli
from tests.e2e.conftest import (START_DEADLINE, child_env, free_port, spawn, stop_process,
                                wait_served)

pytestmark = pytest.mark.e2e

WAIT = 20.0                     # seconds: an answer's timeout
STOP = 10.0                     # seconds for uvicorn to stop on SIGTERM


@pytest.fixture(scope="module")
def sdk_server(tmp_path_factory):
    port = free_port()
    log_path = tmp_path_factory.mktemp("sdk-server") / "server.log"
    proc = spawn([sys.executable, "-m", "tests.e2e.sdk_server", str(port)], log_path,
                 child_env())
    url = f"http://127.0.0.1:{port}"

    def log():
        return log_path.read_text(encoding="utf-8", errors="replace")
    try:
        wait_served(proc, f"{url}/.well-known/agent-card.json",
                    time.monotonic() + START_DEADLINE, "a2a-sdk's server", log)
    except BaseException:
        proc.kill()
        raise
    yield url
    stop_process(proc, STOP, "a2a-sdk's server", log)


@pytest.fixture
def cli(sdk_server, capsys, monkeypatch, tmp_path):
    """``cli(*argv)`` -> ``(status, stdout, stderr)``: ``murmur-wsgi`` against the server."""
    no_ambient_agent(monkeypatch, tmp_path / "home")
    return lambda *argv, url=None: run_cli(capsys, [*argv, "--url", url or sdk_server])


def test_card_names_the_sdk_agent(cli, sdk_server):
    status, out, err = cli("card")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == "sdk-echo 1.0"
    assert f"url:       {sdk_server}/ (JSONRPC, A2A 1.0)" in lines
    assert "streaming: yes" in lines
    status, out, err = cli("card", "--json", url=f"{sdk_server}/.well-known/agent-card.json")
    assert status == 0, err
    assert json.loads(out)["name"] == "sdk-echo"


def test_send_held_no_wait_get_ps_and_cancel(cli):
    check_send_ps_cancel(cli, "hello sdk")


def test_send_stream_and_subscribe(cli):
    status, out, err = cli("send", "--stream", "streamed")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[:2] == ["[submitted]", "[working]"]
    assert lines[2].startswith("[artifact]") and lines[2].endswith(": streamed")
    assert lines[-1] == "[completed]"
    status, out, err = cli("send", "--no-wait", "/sleep 1")
    assert status == 0, err
    status, out, err = cli("subscribe", out.strip())
    assert status == 0, err
    assert out.splitlines()[-1] == "[completed]"


def test_the_client_subscribes_lists_and_cancels(sdk_server):
    with A2AClient(sdk_server) as client:
        task = client.send("/sleep 30", return_immediately=True)
        seen: list[str] = []
        stream = client.subscribe(task["id"])
        reader = threading.Thread(target=lambda: seen.extend(e.state or e.kind for e in stream))
        reader.start()
        # NOTE: the stream open (its first event read) before the cancel: a subscription
        # that reaches the server after it is refused, the task being over.
        deadline = time.monotonic() + WAIT
        while not seen:
            assert reader.is_alive() or seen, "the stream ended before its first event"
            assert time.monotonic() < deadline, "no event on the stream before the deadline"
            reader.join(0.01)               # paced on the reader itself
        assert task["id"] in [t["id"] for t in client.list(status="TASK_STATE_WORKING")]
        assert client.cancel(task["id"])["status"]["state"] == "TASK_STATE_CANCELED"
        reader.join(WAIT)
        assert not reader.is_alive() and seen[-1] == "TASK_STATE_CANCELED"
        with pytest.raises(TaskNotFound):
            client.get("no-such-task")


def test_watch_says_the_server_does_not_serve_it(cli, sdk_server):
    status, out, err = cli("watch")
    assert (status, out) == (2, "")
    assert err == ("murmur-wsgi: watch (murmur.WatchSession) is a Murmur door's own method: "
                   f"the agent at {sdk_server} (a hub agent, or another A2A server) "
                   "does not serve it\n")
