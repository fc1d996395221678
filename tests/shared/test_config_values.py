"""A value YAML's constructors cannot build, a duration in another script's
digits, and a port of thousands of digits are each one line naming where, never a
traceback."""
from __future__ import annotations

import io
import sys

import pytest

from murmur_wsgi.cli import main
from murmur_wsgi.door.manifest import ManifestError, load_manifest, load_manifest_file
from murmur_wsgi.hub.config import ConfigError, load_config, load_config_file
from murmur_wsgi.serving.ports import listen_refusal

from tests.hub.conftest import hub_config

# Values PyYAML's SafeLoader reads by calling int(), date() … whose ValueError, IndexError,
# KeyError or AttributeError is no yaml.YAMLError: read_yaml let it out as a traceback.
UNBUILDABLE = {
    "digits": "1" * 5000,                       # int() refuses past 4,300 digits
    "date": "2024-02-30",                       # date(): day is out of range for month
    "tag-int": "!!int abc",
    "tag-empty": "!!int ''",
    "tag-bool": "!!bool maybe",
}


@pytest.mark.parametrize("value", UNBUILDABLE.values(), ids=UNBUILDABLE)
def test_a_door_manifest_value_yaml_cannot_build_is_one_line(tmp_path, value):
    path = tmp_path / "murmur.yaml"
    path.write_text(f"name: x\nversion: '1'\nagent: demo\nlifecycle:\n  queue_depth: {value}\n")
    with pytest.raises(ManifestError) as info:
        load_manifest_file(str(path))
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


@pytest.mark.parametrize("value", UNBUILDABLE.values(), ids=UNBUILDABLE)
def test_a_hub_yaml_value_yaml_cannot_build_is_one_line(tmp_path, value):
    path = tmp_path / "hub.yaml"
    path.write_text(f"public_url: http://localhost:41880\ndrain_timeout_secs: {value}\n")
    with pytest.raises(ConfigError) as info:
        load_config_file(str(path), environ={})
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


@pytest.mark.parametrize("value", ["1" * 5000, "2024-02-30", "!!int abc"])
def test_a_hub_variable_yaml_cannot_build_names_the_variable(value):
    with pytest.raises(ConfigError) as info:
        load_config(hub_config(), environ={"MURMUR_HUB_DRAIN_TIMEOUT_SECS": value})
    assert str(info.value).startswith("MURMUR_HUB_DRAIN_TIMEOUT_SECS"), str(info.value)


def test_serve_with_a_huge_door_manifest_number_exits_2(tmp_path, capsys):
    path = tmp_path / "murmur.yaml"
    path.write_text("name: x\nversion: '1'\nagent: demo\nlifecycle:\n  queue_depth: "
                    + "1" * 5000 + "\n")
    assert main(["serve", "--config", str(path), "--listen", "127.0.0.1:0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


# A duration is read by float(), which takes any script's digits and spaces, and a line
# break: durations now follow the sizes' rule (ASCII digits, blanks around).
@pytest.mark.parametrize("value", ["\u0666\u0664", "\uff16\uff14", "64\u3000", "\u300064",
                                   "64\n", "\xa064"])
def test_a_duration_in_other_digits_or_spaces_is_refused(value):
    with pytest.raises(ManifestError) as info:
        load_manifest({"name": "a", "version": "1", "lifecycle": {"input_timeout_secs": value}})
    assert str(info.value).startswith("lifecycle.input_timeout_secs: ")


@pytest.mark.parametrize("value", ["\u0666\u0664", "64\u3000"])
def test_a_hub_duration_in_other_digits_is_refused(value):
    with pytest.raises(ConfigError) as info:
        load_config(hub_config(), environ={"MURMUR_HUB_DRAIN_TIMEOUT_SECS": value})
    assert str(info.value).startswith("MURMUR_HUB_DRAIN_TIMEOUT_SECS")


@pytest.mark.parametrize("value, seconds", [("64", 64.0), (" 1.5 ", 1.5), ("1e2", 100.0),
                                            (30, 30.0), (0.25, 0.25)])
def test_durations_still_read(value, seconds):
    manifest = load_manifest({"name": "a", "version": "1",
                              "lifecycle": {"input_timeout_secs": value}})
    assert manifest.lifecycle["input_timeout_secs"] == seconds


# --listen HOST:PORT with a port of thousands of ASCII digits: int() raised out of both
# commands (the door's _listen, the shared listen_refusal the hub calls).
HUGE_PORT = "1" * 5000


def test_listen_refusal_of_a_port_of_thousands_of_digits_is_one_line():
    refusal = listen_refusal(f"127.0.0.1:{HUGE_PORT}")
    assert refusal is not None and "the port must be a number from 0 to 65535" in refusal


def test_serve_listen_with_a_port_of_thousands_of_digits_exits_2(tmp_path, capsys):
    path = tmp_path / "murmur.yaml"
    path.write_text("name: x\nversion: '1'\nagent: demo\n")
    assert main(["serve", "--config", str(path), "--listen", f"127.0.0.1:{HUGE_PORT}"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_hub_listen_with_a_port_of_thousands_of_digits_exits_2(tmp_path, capsys):
    path = tmp_path / "hub.yaml"
    path.write_text("public_url: http://localhost:41880\n")
    assert main(["hub", "--config", str(path), "--listen", f"localhost:{HUGE_PORT}"]) == 2
    assert "Traceback" not in capsys.readouterr().err


# "An error line is at most 4,000 characters" (docs/client.md), but the cut came before
# printable() escaped it: 4,000 control characters were a line of 16,000.
def test_an_error_line_of_control_characters_is_at_most_its_bound(monkeypatch):
    from murmur_wsgi.client import cli_support

    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    cli_support.err("x: " + "\x1b" * 10_000)
    line = buf.getvalue()
    assert line.count("\n") == 1
    assert len(line) < cli_support.ERR_CHARS + 100, len(line)
