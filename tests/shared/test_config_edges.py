"""Numbers, names and texts a configuration or an agent gives, held to what can be served:
ports of ASCII digits within five characters, deep or foreign-digit values refused in one
line, the door's own trace records written by the door only, arguments a spawn can take."""
from __future__ import annotations

import io
import sys

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.cli import main
from murmur_wsgi.door.manifest import ManifestError, load_manifest
from murmur_wsgi.hub.config import ConfigError, load_config
from murmur_wsgi.serving.ports import listen_refusal

from tests.agents_util import records_of, tmp_home
from tests.conftest import Rpc
from tests.hub.conftest import hub_config
from tests.tasks_util import send_params

# 1. --listen: a port of thousands of digits with leading zeros: a guard on the digits past
# the zeros passed it, then int(port) counted every digit (zeros too): ValueError.
ZEROS_PORT = "0" * 5000 + "1"
ZEROS_HUGE = "0" * 5000 + "99999"          # past 65535: refused (never execs gunicorn)


def test_listen_refusal_of_a_zero_padded_port_of_thousands_of_digits():
    refusal = listen_refusal(f"127.0.0.1:{ZEROS_PORT}")          # ValueError on main
    assert refusal is not None and "from 0 to 65535" in refusal


def test_serve_listen_with_a_zero_padded_huge_port_is_one_line(tmp_path, capsys):
    path = tmp_path / "murmur.yaml"
    path.write_text("name: x\nversion: '1'\nagent: demo\n")
    assert main(["serve", "--config", str(path), "--listen", f"127.0.0.1:{ZEROS_HUGE}"]) == 2
    assert "65535" in capsys.readouterr().err


def test_hub_listen_with_a_zero_padded_huge_port_is_one_line(tmp_path, capsys):
    path = tmp_path / "hub.yaml"
    path.write_text("public_url: http://localhost:41880\n")
    assert main(["hub", "--config", str(path), "--listen", f"localhost:{ZEROS_HUGE}"]) == 2
    assert "65535" in capsys.readouterr().err


# 2. MURMUR_HUB_* read as YAML: a value nested past the parser's recursion is RecursionError
# (read_yaml turns it into one line for the file; _env_value does not).
@pytest.mark.parametrize("variable", ["MURMUR_HUB_TENANTS", "MURMUR_HUB_DRAIN_TIMEOUT_SECS",
                                      "MURMUR_HUB_PUSH_PORTS"])
def test_a_hub_variable_nested_too_deep_names_the_variable(variable):
    with pytest.raises(ConfigError) as info:
        load_config(hub_config(), environ={variable: "[" * 5000})
    assert str(info.value).startswith(variable)


# 3. The other floats of hub.yaml still read any script's digits and any Unicode space
# through float(), as durations did.
@pytest.mark.parametrize("value", ["\u0661\u0660", "10\u3000", "\xa010"])
def test_a_price_in_other_digits_or_spaces_is_refused(value):
    config = hub_config()
    config["pricing"] = {"m": {"input": value, "output": 1}}
    with pytest.raises(ConfigError) as info:
        load_config(config, environ={})
    assert str(info.value).startswith("pricing.m.input")


def test_push_retry_scale_in_other_digits_is_refused():
    with pytest.raises(ConfigError) as info:
        load_config(hub_config(), environ={"MURMUR_HUB_PUSH_RETRY_SCALE": "\u0660.\u0665"})
    assert str(info.value).startswith("MURMUR_HUB_PUSH_RETRY_SCALE")


# 4. redis-sentinel URLs: str.isdigit() + int() take any script's digits ("٢٦٣٧٩" is 26379)
# and answer int()'s own words for '²' or thousands of digits.
@pytest.mark.parametrize("url", ["redis-sentinel://h:\u0662\u0666\u0663\u0667\u0669/svc/0",
                                 "redis-sentinel://h:26379/svc/\u0660",
                                 "redis-sentinel://h:26379/svc/\xb2",
                                 "redis-sentinel://h:" + "0" * 5000 + "1/svc/0"])
def test_a_sentinel_url_takes_ascii_digits_only(url):
    with pytest.raises(ConfigError) as info:
        load_config(hub_config(), environ={"MURMUR_HUB_REDIS_URL": url})
    assert "int()" not in str(info.value) and "4300" not in str(info.value), str(info.value)


# 5. record_event refuses the head's names, but event_type itself may be the door's own
# record: ctx.record_event("task_end", ...) forged a task_end line.
@pytest.fixture
def home(tmp_path, monkeypatch):
    return tmp_home(tmp_path, monkeypatch)


@pytest.mark.parametrize("event_type", ["task_end", "task_start", "session_start",
                                        "auth_refused"])
def test_an_agent_cannot_write_the_doors_own_records(home, event_type):
    said = []

    def agent(ctx):
        try:
            ctx.record_event(event_type, task_id=ctx.task_id, exit_status="ok",
                             duration_ms=0)
            said.append("written")
        except ValueError:
            said.append("refused")
        return "done"

    door = create_app({"name": "notes", "version": "0.1.0"}, agent=agent,
                      listen="127.0.0.1:41873", trace=True)
    try:
        Rpc(door).result("SendMessage", send_params("go"))
        assert said == ["refused"]
        assert len(records_of(door, event_type)) == (0 if event_type == "auth_refused" else 1)
    finally:
        door.close()


# 6. agent.process: a NUL is no file system's bytes either: the manifest loads and every
# task fails at spawn ("the agent failed: ValueError", embedded null byte).
@pytest.mark.parametrize("process", [["sh", "-c", "echo\x00x"], ["sh\x00"]])
def test_a_process_argument_with_a_nul_is_refused_at_load(process):
    with pytest.raises(ManifestError) as info:
        load_manifest({"name": "a", "version": "1", "inference": {"transport": "process"},
                       "agent": {"process": process}})
    assert str(info.value).startswith("agent.process")


# 7. err(): "bounded as printed", but a stderr that cannot encode the text (ASCII, Latin-1)
# prints each character as a 6-character escape: 4,000 characters printed 24,000.
def test_an_error_line_on_an_ascii_stderr_is_at_most_its_bound(monkeypatch):
    from murmur_wsgi.client import cli_support

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", write_through=True)
    monkeypatch.setattr(sys, "stderr", stream)
    cli_support.err("x: " + "\u4e00" * 10_000)
    line = raw.getvalue().decode("ascii")
    assert line.count("\n") == 1
    assert len(line) < cli_support.ERR_CHARS + 100, len(line)
