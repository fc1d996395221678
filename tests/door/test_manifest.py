"""The manifest: a bad murmur.yaml stops ``murmur-wsgi serve`` with one line, exit 2."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from murmur_wsgi.door.manifest import Manifest, ManifestError, load_manifest, load_manifest_file
from tests import cli_forks

GOOD = 'name: my-agent\nversion: "0.1.0"\n'


def auth(credentials: str) -> str:
    return (GOOD + "network:\n  authentication:\n    scheme: bearer\n    credentials:\n"
            + credentials)


# id -> (file content as bytes/str, or a special "missing" / "directory" / "unreadable";
#        what the one line must contain, key first)
BAD = {
    "missing name": ('version: "0.1.0"\n', ["name: is required"]),
    "missing version": ("name: my-agent\n", ["version: is required"]),
    "empty name": ('name: ""\nversion: "0.1.0"\n', ["name:"]),
    "unknown task_acceptance": (GOOD + "lifecycle:\n  task_acceptance: many\n",
                                ["lifecycle.task_acceptance:", "none", "single", "queue"]),
    "0.3 scope message/send": (auth("      watcher: {scopes: [GetTask, message/send]}\n"),
                               ["network.authentication.credentials.watcher.scopes:",
                                "message/send", "SendMessage"]),
    "0.3 scope tasks/get": (auth("      watcher: {scopes: [tasks/get]}\n"),
                            ["credentials.watcher.scopes:", "tasks/get", "'GetTask'"]),
    "old scope stream/watch": (auth("      watcher: {scopes: [stream/watch]}\n"),
                               ["credentials.watcher.scopes:", "murmur.WatchSession"]),
    "unknown scope": (auth("      watcher: {scopes: [ReadEverything]}\n"),
                      ["credentials.watcher.scopes:", "ReadEverything"]),
    "empty scopes": (auth("      watcher: {scopes: []}\n"), ["credentials.watcher.scopes:"]),
    "scope twice": (auth("      watcher: {scopes: [GetTask, GetTask]}\n"),
                    ["credentials.watcher.scopes:"]),
    "credential named operator": (auth("      operator: {scopes: [GetTask]}\n"),
                                  ["network.authentication.credentials.operator:",
                                   "reserved"]),
    "bad credential name": (auth("      Watcher: {scopes: [GetTask]}\n"),
                            ["network.authentication.credentials.Watcher:"]),
    "credential name with newline": (auth('      "w\\n": {scopes: [GetTask]}\n'),
                                     ["network.authentication.credentials.w\\n:"]),
    "credential name too long": (auth("      " + "a" * 33 + ": {scopes: [GetTask]}\n"),
                                 ["credentials." + "a" * 33 + ":"]),
    "unknown scheme": (GOOD + "network:\n  authentication:\n    scheme: basic\n",
                       ["network.authentication.scheme:"]),
    "negative image limit": (GOOD + "context:\n  images:\n    max_per_turn: -1\n",
                             ["context.images.max_per_turn:"]),
    "negative image size": (GOOD + "context:\n  images:\n    max_bytes: -5\n",
                            ["context.images.max_bytes:"]),
    "bad size string": (GOOD + "context:\n  images:\n    max_bytes: 5 MB\n",
                        ["context.images.max_bytes:"]),
    "bad files size": (GOOD + "exports:\n  files: {root: out/, max_bytes: lots}\n",
                       ["exports.files.max_bytes:"]),
    "zero finished ceiling": (GOOD + "tasks:\n  keep_finished_total: 0\n",
                              ["tasks.keep_finished_total:"]),
    "zero finished bytes": (GOOD + "tasks:\n  keep_finished_bytes: 0\n",
                            ["tasks.keep_finished_bytes:"]),
    "body smaller than images": (GOOD + "limits:\n  max_body_bytes: 1Mi\n",
                                 ["limits.max_body_bytes:", "context.images"]),
    "bad max_parts": (GOOD + "limits:\n  max_parts: 0\n", ["limits.max_parts:"]),
    "bad max_json_depth": (GOOD + "limits:\n  max_json_depth: many\n",
                           ["limits.max_json_depth:"]),
    "bad log_field_chars": (GOOD + "observability:\n  log_field_chars: 10\n",
                            ["observability.log_field_chars:", "at least 64"]),
    "bad reference_bytes": (GOOD + "limits:\n  reference_bytes: -1\n",
                            ["limits.reference_bytes:"]),
    "bad data_text_bytes": (GOOD + "limits:\n  data_text_bytes: 0\n",
                            ["limits.data_text_bytes:"]),
    # NOTE: the ring takes a slot per event at start: 2^63 - 1 of them failed the worker's
    # boot with a MemoryError traceback (10^9: 7.8 GB taken before anything listened).
    "replay_events past its bound": (GOOD + "stream:\n  replay_events: 9223372036854775807\n",
                                     ["stream.replay_events:", "1000000"]),
    "zero write timeout": (GOOD + "stream:\n  write_timeout_secs: 0\n",
                           ["stream.write_timeout_secs:"]),
    "unknown key": (GOOD + "colour: blue\n", ["colour: is not a key this door reads"]),
    "unknown nested key": (GOOD + "lifecycle:\n  task_accept: single\n",
                           ["lifecycle.task_accept:"]),
    "key with newline": (GOOD + '"a\\nb": 1\n', ["a\\nb:"]),
    "process without transport": (GOOD + "agent: {process: [cat]}\n", ["agent:"]),
    "not a mapping: list": ("- name\n- version\n", ["mapping"]),
    "not a mapping: scalar": ("just a string\n", ["mapping"]),
    "not a mapping: empty file": ("", ["mapping"]),
    "invalid YAML": ("name: [my-agent\nversion: 0.1.0\n", ["not valid YAML"]),
    "not UTF-8": (b'name: my-agent\nversion: "0.1.0"\n\xff\xfe: x\n', ["UTF-8"]),
    "missing file": ("missing", ["cannot be read"]),
    "a directory": ("directory", ["is not a regular file"]),
    "unreadable file": ("unreadable", ["cannot be read"]),
}


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """Run ``serve --config FILE`` for every bad manifest at once; collect the results.

    PERF: each run is a fork of one process that imported the CLI (tests/cli_forks.py), not
    a ``python -m`` of its own: 43 imports of 0.36 s CPU were 8.7 s of the suite. One case
    also runs as ``python -m murmur_wsgi.cli`` (``FORKED_CASE``, in ``"python -m"``), for
    test_a_fork_runs_as_the_command_does."""
    folder = tmp_path_factory.mktemp("manifests")
    cases = {}
    for index, (case, (content, _)) in enumerate(BAD.items()):
        path = folder / f"case{index}.yaml"
        if content == "directory":
            path.mkdir()
        elif content == "unreadable":
            if os.geteuid() == 0:
                continue            # root reads a 0000 file: it would serve, not refuse
            path.write_text(GOOD)
            path.chmod(0)
        elif content != "missing":
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
        cases[case] = str(path)
    env = dict(os.environ, MURMUR_WSGI_HOME=str(folder / "home"))
    # NOTE: every manifest here is refused before anything listens; a timeout below
    # means one was served, and the kill ends it.
    command = subprocess.Popen(
        [sys.executable, "-m", "murmur_wsgi.cli", "serve", "--config", cases[FORKED_CASE]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    runs = cli_forks.run_many([["serve", "--config", path] for path in cases.values()],
                              folder / "runs", 30, env=env)
    results = {case: (path, *run) for (case, path), run in zip(cases.items(), runs)}
    try:
        out, err = command.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        command.kill()
        out, err = command.communicate()
    results["python -m"] = (cases[FORKED_CASE], command.returncode, out, err)
    return results


FORKED_CASE = "0.3 scope message/send"


def test_a_fork_runs_as_the_command_does(cli_runs):
    """The forked run of a case is the ``python -m murmur_wsgi.cli`` run of it, byte for
    byte (tests/cli_forks.py)."""
    assert cli_runs["python -m"] == cli_runs[FORKED_CASE]
    assert cli_runs[FORKED_CASE][1] == 2


@pytest.mark.parametrize("case", [
    pytest.param(case, id=case, marks=pytest.mark.skipif(
        case == "unreadable file" and os.geteuid() == 0, reason="root reads a 0000 file"))
    for case in BAD])
def test_bad_manifest_is_one_line_exit_2(cli_runs, case):
    path, returncode, out, err = cli_runs[case]
    assert returncode == 2, err
    assert out == b""
    text = err.decode()
    assert text.endswith("\n") and text.count("\n") == 1, text
    assert len(text.splitlines()) == 1
    line = text[:-1]
    assert line.startswith(f"murmur-wsgi: {path}: "), line
    detail = line[len(f"murmur-wsgi: {path}: "):]
    for expected in BAD[case][1]:
        assert expected in detail, line
    assert "Traceback" not in text


def test_exact_lines(cli_runs):
    """A few lines in full: the key, then what is wrong."""
    def detail(case):
        path, _, _, err = cli_runs[case]
        return err.decode().rstrip("\n")[len(f"murmur-wsgi: {path}: "):]

    assert detail("missing name") == "name: is required"
    assert detail("unknown key") == "colour: is not a key this door reads"
    assert detail("0.3 scope message/send") == (
        "network.authentication.credentials.watcher.scopes: 'message/send' is an A2A 0.3 "
        "name; use 'SendMessage'")
    assert detail("old scope stream/watch") == (
        "network.authentication.credentials.watcher.scopes: 'stream/watch' is a murmur "
        "method's older name; use 'murmur.WatchSession'")
    assert detail("missing file").startswith("cannot be read: ")


# --- in process: the same refusals, and the defaults ---------------------------------------


def test_load_manifest_defaults():
    manifest = load_manifest({"name": "a", "version": "1"})
    assert isinstance(manifest, Manifest)
    assert (manifest.name, manifest.version) == ("a", "1")
    assert manifest.lifecycle == {"task_acceptance": "single", "queue_depth": 1,
                                  "after_task": "sleep", "input_timeout_secs": None,
                                  "conversation": "stateless"}
    assert manifest.tools == []
    assert manifest.capabilities == {"shell": {"allow": [], "max_running": 16,
                                               "max_command_bytes": 64 * 1024},
                                     "network": {"allow": []}}
    assert manifest.exports == {"files": None, "peer_tasks": None}
    assert manifest.network == {"host": "127.0.0.1", "internal_port": None, "public_url": None,
                                "authentication": None}
    assert manifest.context == {"images": {"max_bytes": 5 * 1024 ** 2, "max_per_turn": 8}}
    assert manifest.stream["replay_events"] == 512
    assert manifest.stream["heartbeat_secs"] == 15
    assert manifest.tasks == {"keep_finished": 10_000, "keep_finished_total": 50_000,
                              "keep_finished_secs": 86_400.0,
                              "keep_finished_bytes": 256 * 1024 ** 2,
                              "keep_finished_bytes_total": 1024 ** 3,
                              "max_output_bytes": 64 * 1024 ** 2, "max_usage_models": 1000}
    assert manifest.limits == {"max_body_bytes": 64 * 1024 ** 2, "max_parts": 1_000,
                               "max_json_depth": 64, "max_json_values": 1_000_000,
                               "reference_bytes": 64 * 1024,
                               "data_text_bytes": 16 * 1024 ** 2,
                               "header_timeout_secs": 10.0, "body_timeout_secs": 30.0}
    assert manifest.stream["write_timeout_secs"] == 10
    assert manifest.stream["pending_bytes"] == 256 * 1024
    assert manifest.inference == {"transport": "http"}
    assert manifest.agent == "demo"
    assert manifest.acceptance == "single"
    assert manifest.authentication is None
    assert manifest.transport == "http"
    assert manifest.peer_accept is False
    assert manifest.observability == {"metrics": False, "access_log": False,
                                      "log_field_chars": 256}


def test_load_manifest_reads_the_decisions_example():
    manifest = load_manifest({
        "name": "my-agent", "version": "0.1.0",
        "lifecycle": {"task_acceptance": "queue", "queue_depth": 3, "after_task": "exit",
                      "input_timeout_secs": 60, "conversation": "threaded"},
        "tools": ["bash"],
        "capabilities": {"shell": {"allow": ["bash", "sleep"]}, "network": {"allow": []}},
        "exports": {"files": {"root": "out/", "mode": "read-only", "max_bytes": "10Mi"},
                    "peer_tasks": {"accept": True}},
        "network": {"host": "127.0.0.1", "internal_port": 41873, "public_url": None,
                    "authentication": {"scheme": "bearer", "credentials": {
                        "watcher": {"scopes": ["murmur.WatchSession", "GetTask",
                                               "ListTasks"]}}}},
        "context": {"images": {"max_bytes": "5Mi", "max_per_turn": 8}},
        "stream": {"replay_events": 512, "heartbeat_secs": 15},
        "inference": {"transport": "http", "model": "ignored-by-the-door"},
        "agent": "demo",
    })
    assert manifest.acceptance == "queue"
    assert manifest.lifecycle["queue_depth"] == 3
    assert manifest.exports["files"] == {"root": "out/", "mode": "read-only",
                                         "max_bytes": 10 * 1024 ** 2, "max_depth": 64,
                                         "max_entries": 10_000}
    assert manifest.peer_accept is True
    assert manifest.authentication == {"scheme": "bearer", "credentials": {
        "watcher": {"scopes": ["murmur.WatchSession", "GetTask", "ListTasks"]}}}
    assert manifest.inference == {"transport": "http"}


@pytest.mark.parametrize("value, size", [
    (1, 1), ("1", 1), ("2Ki", 2048), ("3Mi", 3 * 1024 ** 2), ("1Gi", 1024 ** 3),
    (" 4 Ki\t", 4096), ("0" * 30 + "5", 5),
])
def test_sizes(value, size):
    manifest = load_manifest({"name": "a", "version": "1",
                              "context": {"images": {"max_bytes": value}}})
    assert manifest.context["images"]["max_bytes"] == size


@pytest.mark.parametrize("value", [0, -1, "0Mi", "5 MB", "5mi", "1.5Mi", True, 2.5, None, [],
                                   "\u0666\u0664Ki", "64\u3000Ki", "64Ki\n", "9" * 5000])
def test_bad_sizes(value):
    with pytest.raises(ManifestError) as info:
        load_manifest({"name": "a", "version": "1", "context": {"images": {"max_bytes": value}}})
    assert str(info.value).startswith("context.images.max_bytes: ")


@pytest.mark.parametrize("block, key, value", [
    ("stream", "write_timeout_secs", -1), ("stream", "write_timeout_secs", "soon"),
    ("stream", "pending_bytes", 0), ("stream", "pending_bytes", "lots"),
    ("limits", "header_timeout_secs", 0), ("limits", "header_timeout_secs", "soon"),
    ("limits", "body_timeout_secs", -1), ("limits", "body_timeout_secs", None),
    ("limits", "max_json_values", 10), ("limits", "max_json_values", "many"),
    ("observability", "log_field_chars", 63), ("observability", "log_field_chars", 2.5),
])
def test_bad_deadlines_and_budget_name_their_key(block, key, value):
    with pytest.raises(ManifestError) as info:
        load_manifest({"name": "a", "version": "1", block: {key: value}})
    assert str(info.value).startswith(f"{block}.{key}: ")


def test_process_agent():
    manifest = load_manifest({"name": "a", "version": "1", "inference": {"transport": "process"},
                              "agent": {"process": ["my-harness", "--flag"]}})
    assert manifest.transport == "process"
    assert manifest.agent["process"] == ["my-harness", "--flag"]


def test_manifest_error_is_one_line():
    assert str(ManifestError("a\nb\r\u2028c")) == "a\\nb\\r\\u2028c"


def test_load_manifest_file_names_the_file(tmp_path):
    path = tmp_path / "murmur.yaml"
    path.write_text("name: a\n")
    with pytest.raises(ManifestError) as info:
        load_manifest_file(str(path))
    assert str(info.value) == f"{path}: version: is required"
    path.write_text(GOOD)
    assert load_manifest_file(str(path)).name == "my-agent"


@pytest.mark.parametrize("root", ["o\nut/", "out\r", "o\x00ut", "o\x1bt", "o\x7ft"])
def test_a_files_root_with_a_control_character_is_refused(root):
    # Every read of the plane names the root in a header, which cannot hold one.
    with pytest.raises(ManifestError, match=r"^exports\.files\.root: must hold no control "):
        load_manifest({"name": "a", "version": "1", "exports": {"files": {"root": root}}})


@pytest.mark.parametrize("url", ["http://x:99999", "http://x:0", "https://[::1]:65536/a"])
def test_a_public_url_with_no_usable_port_is_refused(url):
    # The card would announce an address no client can connect to.
    with pytest.raises(ManifestError, match=r"^network\.public_url: must name a port from 1 "):
        load_manifest({"name": "a", "version": "1", "network": {"public_url": url}})


@pytest.mark.parametrize("url", ["http://x", "http://x:1", "https://[::1]:65535/a2a"])
def test_a_public_url_with_a_port_or_none_is_kept(url):
    manifest = load_manifest({"name": "a", "version": "1", "network": {"public_url": url}})
    assert manifest.network["public_url"] == url


@pytest.mark.parametrize("spec", ["os:getcwd\n", "os:getcwd\r\n", "demo\n"])
def test_an_agent_spec_with_a_line_break_is_refused_in_one_line(spec):
    with pytest.raises(ManifestError) as refused:
        load_manifest({"name": "a", "version": "1", "agent": spec})
    assert str(refused.value) == \
        'agent: must be demo, "pkg.module:callable" or {process: [cmd, ...]}'


@pytest.mark.parametrize("manifest, where", [
    ({"name": "x\ud800", "version": "1"}, "name"),
    ({"name": "a", "version": "1", "tools": ["ok", "\udfff"]}, "tools[1]"),
    ({"name": "a", "version": "1", "network": {"public_url": "http://h\ud83d/"}},
     "network.public_url"),
])
def test_a_text_holding_a_lone_surrogate_is_refused_at_load(manifest, where):
    """YAML reads "\\ud800" as a lone surrogate: the card held an escape no JSON reader takes
    back (the name), or a header could not be written. A path read as a file system's bytes
    may hold one (surrogateescape)."""
    with pytest.raises(ManifestError) as refused:
        load_manifest(manifest)
    assert str(refused.value) == (f"{where}: holds a character that is not text (a lone "
                                  "surrogate: a YAML escape such as \\ud800)")


def test_a_files_root_holding_a_surrogate_is_refused():
    """The listing names the root in JSON, which cannot carry a file system's bytes that are
    not UTF-8: every GET /resources/files answered a JSON-RPC -32603 on the plane."""
    with pytest.raises(ManifestError) as refused:
        load_manifest({"name": "a", "version": "1", "exports": {
            "files": {"root": "srv/caf\udce9"}}})
    assert str(refused.value).startswith("exports.files.root: holds a character that is not text")


def test_an_agent_process_read_as_bytes_may_hold_a_surrogate():
    loaded = load_manifest({"name": "a", "version": "1", "inference": {"transport": "process"},
                            "agent": {"process": ["/opt/caf\udce9/harness"]}})
    assert loaded.agent["process"] == ["/opt/caf\udce9/harness"]
