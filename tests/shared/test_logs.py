"""Structured logs: JSON lines through ``logging``, one access record per request, no token."""
from __future__ import annotations

import io
import json
import logging

import pytest
from werkzeug.test import Client

from murmur_wsgi import create_app, logs
from tests.conftest import V1, Rpc
from tests.sse_util import EXT, msg, open_stream

AUTH = {"scheme": "bearer", "credentials": {"watcher": {"scopes": ["GetTask"]}}}


@pytest.fixture
def log_lines():
    """JSON logging to a buffer (as ``murmur-wsgi serve`` configures it); restored after."""
    root = logging.getLogger(logs.ROOT)
    saved = (root.handlers[:], root.level, root.propagate)
    buffer = io.StringIO()
    logs.configure("info", buffer)
    yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines()]
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    root.propagate = saved[2]


def access(lines) -> list[dict]:
    return [line for line in lines if line["logger"] == logs.ACCESS]


def door(**overrides):
    manifest = {"name": "logged", "version": "0.1.0", "stream": {"heartbeat_secs": 0.2},
                "observability": {"access_log": True}}
    manifest.update(overrides)
    return create_app(manifest, listen="127.0.0.1:41873")


def test_one_json_line_per_request_with_its_fields(log_lines):
    rpc = Rpc(door())
    task = rpc.result("SendMessage", msg("hello"))["task"]
    rpc.error("GetTask", {"id": "tsk_missing"})
    lines = access(log_lines())
    assert len(lines) == 2
    sent, missing = lines
    assert {k: sent[k] for k in ("level", "method", "task_id", "status", "outcome", "path")} \
        == {"level": "info", "method": "SendMessage", "task_id": task["id"], "status": 200,
            "outcome": "ok", "path": "/"}
    assert isinstance(sent["duration_ms"], float) and sent["duration_ms"] >= 0
    assert sent["msg"].startswith("SendMessage 200 ok ")
    assert sent["ts"].endswith("Z")
    assert (missing["method"], missing["task_id"], missing["outcome"]) == \
        ("GetTask", "tsk_missing", "-32001")


def test_a_stream_is_logged_once_as_it_opens_with_its_task(log_lines):
    rpc = Rpc(door())
    stream = open_stream(rpc, "SendStreamingMessage", msg("/stream 2"), EXT)
    events = stream.rest()
    lines = access(log_lines())
    assert [(line["method"], line["outcome"]) for line in lines] == \
        [("SendStreamingMessage", "stream")]
    assert lines[0]["task_id"] == events[0].task_id


def test_http_routes_and_refusals_are_logged_without_the_token(log_lines):
    served = door(network={"authentication": AUTH})
    client = Client(served)
    token = served.tokens.tokens["operator"]
    client.get("/.well-known/agent-card.json")
    client.post("/", data=b"{}", headers={"Authorization": "Bearer not-a-token"})
    client.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                           "params": {"id": "tsk_x"}},
                headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"})
    lines = access(log_lines())
    assert [(line["method"], line["status"], line["outcome"]) for line in lines] == [
        ("agent-card", 200, "ok"), ("none", 401, "invalid_token"),
        ("GetTask", 200, "-32001")]
    text = json.dumps(log_lines())
    assert token not in text and "not-a-token" not in text
    assert "Bearer" not in text and "uthorization" not in text


def test_access_log_is_off_unless_the_manifest_asks(log_lines):
    rpc = Rpc(create_app({"name": "quiet", "version": "0.1.0"}))
    rpc.result("SendMessage", msg("hello"))
    assert access(log_lines()) == []


def test_other_records_are_json_lines_too_with_their_traceback(log_lines):
    logger = logging.getLogger("murmur_wsgi.something")
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        logger.exception("it failed: %s", "here")
    [line] = log_lines()
    assert (line["level"], line["logger"], line["msg"]) == \
        ("error", "murmur_wsgi.something", "it failed: here")
    assert "ValueError: bad" in line["exc"]


def test_configure_is_idempotent_and_stops_propagation():
    root = logging.getLogger(logs.ROOT)
    saved = (root.handlers[:], root.level, root.propagate)
    try:
        first, second = io.StringIO(), io.StringIO()
        logs.configure("debug", first)
        logs.configure("warning", second)
        assert len([h for h in root.handlers if isinstance(h, logs._JsonHandler)]) == 1
        assert root.level == logging.WARNING and root.propagate is False
        logging.getLogger("murmur_wsgi.x").warning("once")
        assert first.getvalue() == "" and json.loads(second.getvalue())["msg"] == "once"
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        root.propagate = saved[2]


@pytest.mark.parametrize("value, level", [
    pytest.param("debug", logging.DEBUG, id="debug"),
    pytest.param("WARNING", logging.WARNING, id="upper"),
    pytest.param("nonsense", logging.INFO, id="unknown"),
    pytest.param("", logging.INFO, id="empty"),
])
def test_level_from_env(monkeypatch, value, level):
    monkeypatch.setenv(logs.LEVEL_ENV, value)
    assert logs.level_from_env() == level


def test_every_logged_field_is_cut(log_lines):
    rpc = Rpc(door())
    huge = "t" * 5_000_000
    rpc.error("GetTask", {"id": huge})
    rpc.post({"jsonrpc": "2.0", "id": 1, "method": "m" * 100_000})
    logging.getLogger("murmur_wsgi.test").warning("asked for %s of %d", "x" * 10_000, 3,
                                                  extra={"murmur": {"big": ["y" * 9_000]}})
    lines = log_lines()
    got, unknown = access(lines)
    assert got["task_id"].endswith("t…[cut: 5000000 chars]")
    assert len(got["task_id"]) == logs.FIELD_CHARS
    assert got["method"] == "GetTask"
    assert len(unknown["method"]) <= logs.FIELD_CHARS
    other = [line for line in lines if line["logger"] == "murmur_wsgi.test"][0]
    assert other["msg"] == f"asked for {'x' * (logs.FIELD_CHARS - 19)}…[cut: 10000 chars] of 3"
    assert other["big"].endswith("…[cut: 9004 chars]")
    assert max(len(json.dumps(line)) for line in lines) < 4 * logs.FIELD_CHARS


def test_the_field_bound_is_the_manifests(log_lines):
    rpc = Rpc(door(observability={"access_log": True, "log_field_chars": 100}))
    rpc.error("GetTask", {"id": "t" * 10_000})
    # Outside the door's requests and tasks, the process's bound: an embedded door leaves it.
    logging.getLogger("murmur_wsgi.test").warning("asked for %s", "x" * 1_000)
    lines = log_lines()
    got, = access(lines)
    assert got["task_id"] == "t" * 81 + "…[cut: 10000 chars]"           # 100 chars
    other = [line for line in lines if line["logger"] == "murmur_wsgi.test"][0]
    assert other["msg"] == f"asked for {'x' * 238}…[cut: 1000 chars]"    # 256 chars


def test_a_door_served_by_murmur_wsgi_serve_sets_the_processs_bound(monkeypatch):
    """``murmur-wsgi serve``'s door is its process's one application: its bound holds for
    every record, the server's own and its timers' too."""
    from murmur_wsgi.running import RECORD_ENV

    monkeypatch.setenv(RECORD_ENV, "1")
    served = create_app({"name": "served", "version": "1", "observability": {
        "log_field_chars": 100}}, record=False, trace=False)
    try:
        assert logs.field_chars() == 100
    finally:
        logs.set_field_chars(logs.FIELD_CHARS)
        served.close()


def test_a_door_gunicorn_loads_without_murmur_wsgi_serve_sets_the_processs_bound(tmp_path):
    """gunicorn's target for a door (``murmur_wsgi.door.wsgi:app``, which
    ``gunicorn -c conf/gunicorn.conf.py murmur_wsgi.wsgi:app`` loads without
    ``murmur-wsgi serve``) builds its process's one door: the process's bound stayed 256
    whatever its manifest said, for the server's records and any thread none of its
    requests started. It is the door's, as under ``murmur-wsgi serve``."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    manifest = tmp_path / "murmur.yaml"
    manifest.write_text(yaml.safe_dump({"name": "plain", "version": "1", "observability": {
        "log_field_chars": 100}}), encoding="utf-8")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("MURMUR_WSGI_")}
    env.update(MURMUR_WSGI_CONFIG=str(manifest), MURMUR_WSGI_HOME=str(tmp_path))
    code = ("import murmur_wsgi.door.wsgi as target\n"
            "from murmur_wsgi import logs\n"
            "print(logs.field_chars())\n"
            "target.app.close()\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[2],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, "100\n"), done.stderr


def test_a_host_handler_gets_the_access_fields_cut():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    log = logging.getLogger(logs.ACCESS)
    log.addHandler(handler)
    saved = log.level
    log.setLevel(logging.INFO)
    try:
        Rpc(door()).error("GetTask", {"id": "t" * 1_000_000})
    finally:
        log.removeHandler(handler)
        log.setLevel(saved)
    fields = getattr(records[0], logs.FIELDS)
    assert len(fields["task_id"]) < 2 * logs.FIELD_CHARS


def test_a_repeated_warning_is_logged_once_a_period_per_key_with_what_was_left_out():
    from murmur_wsgi.logs import Sparse

    sparse = Sparse(secs=3600, keys=2)
    assert sparse.due("a") == 0                 # the first: logged
    assert [sparse.due("a") for _ in range(3)] == [None, None, None]
    assert sparse.due("b") == 0                 # another key: its own period
    assert sparse.due("c") == 0                 # past ``keys``: the times are forgotten
    assert sparse.due("a") == 0
    every = Sparse(secs=0)
    assert [every.due() for _ in range(3)] == [0, 0, 0]


class _Reset(io.BytesIO):
    """A request's input whose connection fails with a long error text."""

    def read(self, size: int = -1) -> bytes:
        raise OSError("reset " + "x" * 5000)


def test_each_application_cuts_its_log_fields_to_its_own_bound(log_lines):
    """Two doors of different ``log_field_chars`` and a hub in one process: the bound was
    the process's, the last door built's, so the first door's records and the hub's were
    cut to the other door's. Each application's are cut to its own (the hub, which has no
    such setting, to 256): what is logged as it answers, its access records, and what its
    agents log on their tasks' threads."""
    from murmur_wsgi.hub import create_hub
    from tests.hub.conftest import KEY_A, close_hub, hub_config

    def agent(name: str):
        def run(ctx):
            logging.getLogger("murmur_wsgi.agent").warning("%s wrote %s", name, "z" * 5000)
            return "done"
        return run

    wide = create_app({"name": "wide", "version": "1", "observability": {
        "access_log": True, "log_field_chars": 1000}}, agent("wide"))
    narrow = create_app({"name": "narrow", "version": "1", "observability": {
        "log_field_chars": 64}}, agent("narrow"))
    hub = create_hub(hub_config())
    reset = {"content_type": "application/json", "input_stream": _Reset(),
             "headers": {**V1, "X-API-Key": KEY_A}, "environ_overrides": {"CONTENT_LENGTH": "100"}}
    try:
        Client(wide).post("/", **reset)
        Client(narrow).post("/", **reset)
        Client(hub).post("/a2a/v1/agents/echo", **reset)
        for app in (wide, narrow):
            assert Rpc(app).result("SendMessage", msg(app.manifest.name))["task"]["status"][
                "state"] == "TASK_STATE_COMPLETED"
        Rpc(wide).error("GetTask", {"id": "t" * 5000})
    finally:
        for app in (wide, narrow):
            app.close()
        close_hub(hub)
    lines = log_lines()
    said = [line["msg"].partition("bytes: ")[2] for line in lines
            if line["logger"] == "murmur_wsgi.serving.body"]
    assert [len(text) for text in said] == [1000, 64, 256]
    assert all(text.endswith("…[cut: 5006 chars]") for text in said)
    wrote = {line["msg"].partition(" ")[0]: line["msg"].partition(" wrote ")[2]
             for line in lines if line["logger"] == "murmur_wsgi.agent"}
    assert {name: len(text) for name, text in wrote.items()} == {"wide": 1000, "narrow": 64}
    got, = [line for line in access(lines) if line["method"] == "GetTask"]
    assert len(got["task_id"]) == 1000


def test_a_timer_an_application_arms_logs_to_its_bound(log_lines):
    """A door's agent arming a timer of the process's shared ones (a deadline of its
    client's calls, ``cuts.py``): the timer's callback runs on a thread no application
    started, whose records were cut to the process's 256, not the door's 1000. They are
    cut to the door's; a timer armed outside any application keeps the process's."""
    import threading

    from murmur_wsgi import cuts

    fired = threading.Semaphore(0)

    def note(name: str):
        def fire():
            logging.getLogger("murmur_wsgi.agent").warning("%s timer %s", name, "z" * 5000)
            fired.release()
        return fire

    def agent(ctx):
        cuts.timers().after(0, note("wide"))
        return "armed"

    wide = create_app({"name": "wide", "version": "1", "observability": {
        "log_field_chars": 1000}}, agent)
    try:
        assert Rpc(wide).result("SendMessage", msg("arm"))["task"]["status"][
            "state"] == "TASK_STATE_COMPLETED"
        cuts.timers().after(0, note("process"))
        assert fired.acquire(timeout=10) and fired.acquire(timeout=10)
    finally:
        wide.close()
    said = {line["msg"].partition(" ")[0]: line["msg"].partition(" timer ")[2]
            for line in log_lines() if line["logger"] == "murmur_wsgi.agent"}
    assert {name: len(text) for name, text in said.items()} == {"wide": 1000, "process": 256}


def test_an_agent_processs_pipe_threads_log_to_the_bound_of_its_starter():
    """A harness process started on a door's task thread (its bound set there): its pipe
    readers and writer are threads of their own, and what they log (and the hooks they
    call, an ask woken when stdout ends) was cut to the process's bound, not the door's."""
    import threading

    from murmur_wsgi.agents.process import HarnessProcess

    seen, ended = [], threading.Event()

    def trouble():
        seen.append((threading.current_thread().name, logs.field_chars()))
        ended.set()

    bound = logs.APP_BOUND.set(80)
    try:
        proc = HarnessProcess(["sh", "-c", "read line"], 1024, 1 << 20)
    finally:
        logs.APP_BOUND.reset(bound)
    try:
        proc.on_trouble = trouble
        proc.send({"type": "go"})
        assert ended.wait(10)
    finally:
        proc.end(1.0, term=True)
    name, chars = seen[0]
    assert name.startswith(f"harness-{proc.pid}-") and chars == 80
    assert logs.field_chars() == logs.FIELD_CHARS


def test_what_a_door_logs_as_its_first_task_ends_is_cut_to_its_bound():
    """``lifecycle.after_task: exit``: the door's own watcher thread closes the door once its
    first task ends, and what it logged (the door's closing) was cut to the process's
    bound, not the door's."""
    import threading

    seen, ended = [], threading.Event()
    watched = create_app({"name": "once", "version": "1", "observability": {
        "log_field_chars": 90}}, lambda ctx: "done")
    try:
        watched.session.when_first_task_ends(
            lambda: (seen.append(logs.field_chars()), ended.set()))
        Rpc(watched).result("SendMessage", msg("once"))
        assert ended.wait(10)
    finally:
        watched.close()
    assert seen == [90]
