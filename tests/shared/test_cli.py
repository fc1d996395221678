"""``murmur-wsgi`` card/send/get/tasks/ps/watch/cancel/stop, run in-process against real doors.

Each command runs through ``murmur_wsgi.cli.main(argv)``; its output is read
with ``capsys``, its exit status from the return value. The doors are the
Werkzeug-served ``ThreadedDoor``s of tests/shared/test_client.py.
"""
from __future__ import annotations

import io
import json
import queue
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from murmur_wsgi.cli import main
from murmur_wsgi.client import DoorClient

from tests.cli_forks import Forker
from tests.e2e.conftest import child_env, default_manifest, start_door
from tests.shared.test_client import AUTH, DEMO, WAIT, Tap, ThreadedDoor
from tests.shared.test_client_streams import Script, rpc


@pytest.fixture(autouse=True)
def no_ambient_door(monkeypatch, tmp_path):
    """No door found by accident: an empty home, no MURMUR_DOOR_* variables."""
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MURMUR_DOOR_URL", raising=False)
    monkeypatch.delenv("MURMUR_DOOR_TOKEN", raising=False)


@pytest.fixture(scope="module")
def served():
    with ThreadedDoor(wrap=Tap) as door:
        yield door


@pytest.fixture
def cli(served, capsys):
    """``cli(*argv)`` -> ``(status, stdout, stderr)`` against the served door."""
    def run(*argv, url=served.url):
        status = main([*argv, "--url", url] if url else list(argv))
        captured = capsys.readouterr()
        return status, captured.out, captured.err
    return run


def test_card(cli, served):
    status, out, err = cli("card")
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "test-agent 0.1.0"
    assert f"url:       http://localhost:{served.url.rsplit(':', 1)[1]} (JSONRPC, A2A 1.0)" \
        in lines
    assert "door:      public" in lines and "streaming: yes" in lines
    status, out, _ = cli("card", "--json")
    assert json.loads(out)["name"] == "test-agent"


def test_send_prints_the_response_and_nothing_else(cli):
    assert cli("send", "hello") == (0, "hello\n", "")


def test_send_failed_task_exits_1_with_one_line(cli):
    status, out, err = cli("send", "/fail boom")
    assert status == 1 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("murmur-wsgi: task tsk_") and err.endswith(" failed: boom\n")


def test_send_input_required_then_reply(cli):
    status, out, err = cli("send", "/ask Which branch?")
    assert (status, out) == (3, "Which branch?\n")
    task_id = err.split("reply with: murmur-wsgi send --task ")[1].split()[0]
    assert cli("send", "--task", task_id, "main") == (0, "main\n", "")
    status, out, _ = cli("get", task_id)
    assert status == 0 and "state:    completed" in out and "response: main" in out


def test_send_stream_prints_events_as_they_come(cli):
    status, out, err = cli("send", "--stream", "/stream 2")
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "[submitted]"
    assert "[text]        chunk 1" in lines and "[text]        chunk 2" in lines
    assert lines[-1] == "[completed]   task completed"
    status, out, _ = cli("send", "--stream", "--json", "/stream 1")
    events = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and "task" in events[0]["result"]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_send_stream_stops_at_input_required(cli):
    status, out, err = cli("send", "--stream", "/ask Really?")
    assert status == 3
    assert out.splitlines()[-1] == "[input-required]"
    assert "[artifact]    prompt: Really?" in out.splitlines()
    task_id = err.split("--task ")[1].split()[0]
    assert cli("cancel", task_id)[0] == 0


def test_send_no_wait_prints_the_task_id(cli):
    status, out, err = cli("send", "--no-wait", "--context", "ctx-cli-nowait", "quick")
    assert status == 0 and out.startswith("tsk_")
    assert "in context ctx-cli-nowait" in err


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


def test_send_spins_on_a_terminal_only(cli, monkeypatch, capsys):
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    status, out, _ = cli("send", "/sleep 0.3\ndone")
    assert (status, out) == (0, "done\n")
    drawn = terminal.getvalue()
    assert drawn.startswith("\r") and "[working]" in drawn
    assert drawn.endswith("\r\x1b[K")               # the line is erased at the end


def test_tasks_table_and_filters(cli):
    context = "ctx-cli-table"
    for text in ("one", "/fail two"):
        cli("send", "--context", context, text)
    status, out, _ = cli("tasks", "--context", context)
    lines = out.splitlines()
    assert status == 0 and lines[0].split() == ["TASK", "STATE", "UPDATED", "CONTEXT", "STATUS"]
    assert [line.split()[1] for line in lines[1:]] == ["failed", "completed"]
    status, out, _ = cli("ps", "--context", context, "--state", "failed")
    assert [line.split()[1] for line in out.splitlines()[1:]] == ["failed"]
    assert out.splitlines()[1].endswith("two")
    assert cli("ps", "--context", "ctx-none") == (0, "no tasks\n", "")
    status, out, _ = cli("ps", "--context", context, "--state", "TASK_STATE_COMPLETED")
    assert [line.split()[1] for line in out.splitlines()[1:]] == ["completed"]
    with pytest.raises(SystemExit) as usage:
        cli("ps", "--state", "finished")
    assert usage.value.code == 2
    status, out, _ = cli("tasks", "--context", context, "--json", "--limit", "1")
    assert [json.loads(line)["contextId"] for line in out.splitlines()] == [context]
    status, out, _ = cli("ps", "--context", context, "--since", "2000-01-01T00:00:00Z")
    assert status == 0 and len(out.splitlines()) == 3
    assert cli("ps", "--context", context, "--since", "2999-01-01T00:00:00+01:00") == (
        0, "no tasks\n", "")


def test_get_exit_status_follows_the_state(cli):
    status, out, err = cli("get", "tsk_nope")
    assert status == 1 and out == ""
    assert err.endswith("answered -32001 TASK_NOT_FOUND: Task not found (taskId tsk_nope)\n")
    _, _, err = cli("send", "/fail bad")
    task_id = err.split()[2]
    status, out, _ = cli("get", task_id, "--json")
    assert status == 1 and json.loads(out)["status"]["state"] == "TASK_STATE_FAILED"


def test_cancel_then_cancel_again(cli):
    _, task_id, _ = cli("send", "--no-wait", "/sleep 30")
    task_id = task_id.strip()
    status, out, _ = cli("cancel", task_id)
    assert status == 0 and out.splitlines()[:2] == [f"task:     {task_id}",
                                                    "state:    canceled"]
    status, out, err = cli("cancel", task_id)
    assert status == 1 and "-32002 TASK_NOT_CANCELABLE" in err


def test_stop_cancels_and_reports(capsys):
    with ThreadedDoor() as served:
        with DoorClient(served.url, timeout=WAIT) as client:
            task = client.send("/sleep 30", return_immediately=True)
        status = main(["stop", "--url", served.url])
        again = main(["stop", "--url", served.url])
    lines = capsys.readouterr().out.splitlines()
    assert (status, again) == (0, 0)
    assert lines[:3] == [f"stopped:  {served.door.session.id} at {served.url}",
                         f"canceled: {task['id']}",
                         "residue:  nothing else was left running"]
    assert lines[4] == "canceled: nothing was running"


@pytest.mark.parametrize("as_json", [False, True], ids=["person", "json"])
def test_watch_until_the_door_closes(capsys, as_json):
    with ThreadedDoor(wrap=Tap) as served:
        argv = ["watch", "--url", served.url] + (["--json"] if as_json else [])
        result = {}
        watcher = threading.Thread(target=lambda: result.setdefault("status", main(argv)))
        watcher.start()
        served.app.wait_for("murmur.WatchSession")
        with DoorClient(served.url, timeout=WAIT) as client:
            task = client.send("/stream 1")
        served.door.close()
        watcher.join(WAIT)
        assert not watcher.is_alive()
    out, err = capsys.readouterr()
    assert result["status"] == 0
    if as_json:
        events = [json.loads(line) for line in out.splitlines()]
        assert events[-1]["result"]["message"]["metadata"]
        assert any(e["result"].get("statusUpdate", {}).get("taskId") == task["id"]
                   for e in events)
    else:
        assert f"{task['id']}  [text]        chunk 1" in out.splitlines()
        assert f"{task['id']}  [completed]   task completed" in out.splitlines()
        assert out.splitlines()[-1] == "[capsule-closed] the door closed"
        assert err.startswith("murmur-wsgi: watching the door at ")


# --- finding the door, and failing to ------------------------------------------------


def test_connection_error_is_one_line_naming_the_door(cli):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    assert cli("get", "tsk_x", url=url) == (
        2, "", f"murmur-wsgi: cannot reach the door at {url}: connection refused\n")


@pytest.mark.parametrize("url, why", [("http://[::1", "Invalid IPv6 URL"),
                                      ("http://[zz]:1", "'zz' does not appear to be an IPv4 "
                                                        "or IPv6 address")])
def test_an_address_urllib_refuses_is_one_line(cli, url, why):
    for command in (("card",), ("get", "tsk_x"), ("tasks",)):
        assert cli(*command, url=url) == (2, "", f"murmur-wsgi: {url} is not a URL: {why}\n")


def test_no_door_to_talk_to(cli):
    status, _, err = cli("tasks", url=None)
    assert status == 2 and err.startswith("murmur-wsgi: no door to talk to: give --url")


def test_the_running_record_names_the_door_and_its_token(cli):
    manifest = dict(DEMO, network={"authentication": AUTH})
    with ThreadedDoor(manifest, record=True) as door:
        status, _, err = cli("get", "tsk_x", url=None)
        assert (status, err.split(door.url)[1]) == (
            1, " answered -32001 TASK_NOT_FOUND: Task not found (taskId tsk_x)\n")
        with ThreadedDoor(record=True) as other:
            status, _, err = cli("tasks", url=None)
            assert status == 2 and "2 sessions are running" in err
            assert other.door.session.id in err
            status, out, _ = cli("tasks", "--session", other.door.session.id, url=None)
            assert (status, out) == (0, "no tasks\n")


def test_environment_names_the_door_and_token(cli, monkeypatch):
    manifest = dict(DEMO, network={"authentication": AUTH})
    with ThreadedDoor(manifest) as door:
        monkeypatch.setenv("MURMUR_DOOR_URL", door.address)
        status, _, err = cli("get", "tsk_x", url=None)
        assert status == 2 and "401 unauthenticated" in err and "--token" in err
        monkeypatch.setenv("MURMUR_DOOR_TOKEN", door.door.tokens.tokens["operator"])
        assert cli("get", "tsk_x", url=None)[0] == 1
        assert cli("card", url=None)[1].count("extended card") == 1


def test_version_refusal_through_a_proxy_that_drops_the_header(cli):
    def proxy(app):
        def strip(environ, start_response):
            environ.pop("HTTP_A2A_VERSION", None)
            return app(environ, start_response)
        return strip
    with ThreadedDoor(wrap=proxy) as door:
        status, _, err = cli("get", "tsk_x", url=door.url)
    assert status == 2
    assert err == (f"murmur-wsgi: the door at {door.url} speaks A2A 1.0; it received "
                   "A2A-Version '', not the 1.0 this client sent: something between them "
                   "drops or rewrites the header\n")


def test_version_refusal_from_a_door_of_another_version(cli):
    refusal = {"code": -32009, "message": "A2A version '1.0' is not supported", "data": [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "VERSION_NOT_SUPPORTED",
         "domain": "a2a-protocol.org",
         "metadata": {"requestedVersion": "1.0", "supportedVersions": "2.0"}}]}
    with ThreadedDoor(app=Script(GetTask=[rpc(error=refusal)])) as door:
        status, _, err = cli("get", "tsk_x", url=door.url)
    assert status == 2
    assert err == (f"murmur-wsgi: the door at {door.url} speaks A2A 2.0, not the A2A 1.0 "
                   "this client speaks: use a client for A2A 2.0\n")


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["send"])
    assert info.value.code == 2
    assert "TEXT" in capsys.readouterr().err


@pytest.mark.parametrize("argv, named", [
    (["tasks", "--timeout", "0"], "--timeout: '0' is not a number of seconds above 0"),
    (["tasks", "--timeout", "-1"], "--timeout: '-1' is not a number of seconds above 0"),
    (["tasks", "--timeout", "nan"], "--timeout: 'nan' is not a number of seconds above 0"),
    (["send", "hi", "--timeout", "1e12"], "--timeout: '1e12' is not a number of seconds"),
    (["tasks", "--limit", "0"], "--limit: '0' is not a whole number from 1"),
    (["tasks", "--limit", "-1"], "--limit: '-1' is not a whole number from 1"),
    (["ps", "--page-size", "0"], "--page-size: '0' is not a whole number from 1"),
    # NOTE: sent before, the server's -32602 made it exit 1, as a failed task does
    (["tasks", "--since", "yesterday"], "--since: 'yesterday' is not an RFC 3339 timestamp"),
    (["tasks", "--since", "2026-01-01T00:00:00"], "--since: '2026-01-01T00:00:00' is not"),
])
def test_a_number_the_command_cannot_use_is_a_usage_error(capsys, argv, named):
    """Before any request: not a traceback (a socket's timeout of 0 or 1e12), nor a
    listing of every task (--limit 0) or of one (--limit -1)."""
    with pytest.raises(SystemExit) as info:
        main([*argv, "--url", "http://127.0.0.1:9"])
    captured = capsys.readouterr()
    assert (info.value.code, captured.out) == (2, "")
    assert named in captured.err and "Traceback" not in captured.err



# --- the README's "Use it", against a real gunicorn door ------------------------------


def record_env(door) -> dict:
    """A command's environment that finds ``door`` by its running record only."""
    env = child_env(MURMUR_WSGI_HOME=str(door.home))
    for name in ("MURMUR_DOOR_URL", "MURMUR_DOOR_TOKEN"):
        env.pop(name, None)
    return env


def murmur_wsgi(cli: Forker, *argv, check=True) -> subprocess.CompletedProcess:
    """Run ``murmur-wsgi ARGV`` as a process, finding the door by its running record.

    PERF: each a fork of one process that imported the CLI (tests/cli_forks.py), not a
    ``python -m murmur_wsgi.cli`` of its own (0.4 s of import each); the watch below is one."""
    done = cli.run(list(argv), WAIT)
    if check:
        assert done.returncode == 0, done.stderr
    return done


README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def shape(line: str, url: str) -> str:
    """A line without what differs between runs: the door's address, task and context ids."""
    return re.sub(r"\b(tsk|ctx)_[0-9a-f]{32}\b", "ID", line.strip().replace(url, "URL"))


README_LINES = {shape(line, "http://127.0.0.1:41873") for line in README.splitlines()}


@pytest.mark.e2e
def test_readme_use_it_against_gunicorn(tmp_path):
    # NOTE: a quick heartbeat lets the door see the killed watcher leave at once:
    # gunicorn's SIGTERM waits for every open stream (docs/client.md).
    manifest = dict(default_manifest(), stream={"heartbeat_secs": 0.2})
    with start_door(tmp_path, manifest) as door, \
            Forker(tmp_path / "runs", record_env(door)) as cli:
        assert murmur_wsgi(cli, "card").stdout.startswith("my-agent 0.1.0\n")
        assert murmur_wsgi(cli, "send", "what is 2 + 2?").stdout == "what is 2 + 2?\n"
        streamed = murmur_wsgi(cli, "send", "--stream", "/stream 3").stdout.splitlines()
        assert streamed[:2] == ["[submitted]", "[working]"]
        assert streamed[2:5] == [f"[text]        chunk {i}" for i in (1, 2, 3)]
        watch = subprocess.Popen([sys.executable, "-m", "murmur_wsgi.cli", "watch"],
                                 env=record_env(door),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            lines: queue.Queue = queue.Queue()
            threading.Thread(target=lambda: [lines.put(line) for line in watch.stdout],
                             daemon=True).start()
            sent = murmur_wsgi(cli, "send", "--no-wait", "/sleep 30")
            task_id = sent.stdout.strip()
            assert shape(sent.stderr, door.url) in README_LINES
            canceled = murmur_wsgi(cli, "cancel", task_id).stdout.splitlines()
            assert canceled[1] == "state:    canceled"
            # The replay shows the earlier tasks too; read until this one's cancel.
            while True:
                line = lines.get(timeout=WAIT)
                if line.startswith(f"{task_id}  [canceled]"):
                    break
        finally:
            watch.terminate()
            told = watch.communicate(timeout=WAIT)[1]
        assert shape(told.splitlines()[0], door.url) in README_LINES
        table = murmur_wsgi(cli, "ps").stdout.splitlines()
        assert table[1].split()[:2] == [task_id, "canceled"]
        refused = murmur_wsgi(cli, "get", "tsk_nope", check=False)
        assert refused.returncode == 1 and "-32001" in refused.stderr


@pytest.mark.parametrize("parts, shown", [
    ([{"text": "hi"}, {"data": {"usage": {"input_tokens": 12, "output_tokens": 30,
                                          "cached_tokens": 4, "credits": 0.5,
                                          "pricing_status": "priced", "model": "m"}}}],
     ("hi", "12 input (4 cached), 30 output tokens; 0.5 credits; model m")),
    # what another server wrote there: never a traceback, numbers only as numbers
    ([{"data": {"usage": {"input_tokens": "9", "output_tokens": True, "credits": None,
                          "pricing_status": "unpriced", "model": 3}}}],
     ("", "0 input, 0 output tokens; 0 credits (unpriced)")),
    ([{"data": {"usage": "x"}}], ('{"usage":"x"}', None)),
    ([{"data": {"usage": {}, "more": 1}}], ('{"usage":{},"more":1}', None)),
    ("not parts", ("", None)),
])
def test_a_hubs_usage_part_is_shown_as_a_line_of_its_own(parts, shown):
    from murmur_wsgi.client.render import split_usage

    assert split_usage(parts) == shown
