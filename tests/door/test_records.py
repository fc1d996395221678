"""The running record and ``murmur-wsgi token``, which reads it."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys

import pytest

from murmur_wsgi import cli, create_app
from murmur_wsgi.door.session import records

AUTH = {"scheme": "bearer", "credentials": {
    "watcher": {"scopes": ["murmur.WatchSession", "GetTask", "ListTasks"]},
    "reader": {"scopes": ["resources/files"]},
}}
LISTEN = "127.0.0.1:41873"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """Every record of these tests goes under tmp_path; serve's marker is absent."""
    monkeypatch.setenv(records.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.delenv(records.RECORD_ENV, raising=False)
    return tmp_path / "home"


def door(auth=True, **kwargs):
    manifest = {"name": "my-agent", "version": "0.1.0"}
    if auth:
        manifest["network"] = {"authentication": AUTH}
    kwargs.setdefault("listen", LISTEN)
    return create_app(manifest, **kwargs)


def read(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# --- the record --------------------------------------------------------------------------


def test_home_is_the_env_or_the_user_folder(monkeypatch, home):
    assert records.home() == str(home)
    monkeypatch.delenv(records.HOME_ENV)
    assert records.home() == os.path.join(os.path.expanduser("~"), ".murmur-wsgi")


def test_an_authenticated_door_records_its_address_and_tokens(home, tmp_path):
    d = door(record=True, workdir=str(tmp_path))
    path = home / "running" / f"{d.session.id}.json"
    assert d.record_path == str(path)
    record = read(path)
    assert list(record) == ["session_id", "url", "pid", "capsule_name", "capsule_version",
                            "workdir", "started_at", "door_token", "credentials"]
    assert record["session_id"] == d.session.id
    assert record["url"] == LISTEN
    assert record["pid"] == os.getpid()
    assert (record["capsule_name"], record["capsule_version"]) == ("my-agent", "0.1.0")
    assert record["workdir"] == str(tmp_path)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["started_at"])
    assert record["door_token"] == d.tokens.tokens["operator"]
    assert record["credentials"] == {"watcher": d.tokens.tokens["watcher"],
                                     "reader": d.tokens.tokens["reader"]}


def test_the_record_is_private(home):
    d = door(record=True)
    assert mode(home / "running") == 0o700
    assert mode(d.record_path) == 0o600
    assert os.listdir(home / "running") == [f"{d.session.id}.json"]   # nothing staged is left


def test_a_public_door_records_no_token():
    record = read(door(auth=False, record=True).record_path)
    assert "door_token" not in record and "credentials" not in record


def test_the_record_is_removed_when_the_session_ends():
    d = door(record=True)
    path = d.record_path
    d.close()
    assert not os.path.exists(path)
    assert d.record_path is None
    records.remove_record(d.session.id)                 # already gone: not an error


def test_a_door_records_nothing_by_default(home):
    d = door()
    assert d.record_path is None
    assert not (home / "running").exists()


def test_a_door_without_a_listener_records_nothing(home):
    assert door(record=True, listen=None).record_path is None


def test_served_by_murmur_wsgi_serve_the_door_records_the_serving_pid(monkeypatch):
    monkeypatch.setenv(records.RECORD_ENV, "4242")
    first = door()
    assert read(first.record_path)["pid"] == 4242
    # A worker restarted under the same server serves a new session: the old record goes.
    second = door()
    try:
        assert not os.path.exists(first.record_path)
        assert read(second.record_path)["session_id"] == second.session.id
    finally:
        first.close()
        second.close()


def test_a_record_that_cannot_be_written_does_not_stop_the_door(monkeypatch, home, caplog):
    home.parent.mkdir(parents=True, exist_ok=True)
    home.write_text("a file where the home folder should be")
    d = door(record=True)
    assert d.record_path is None
    assert "could not write the running record" in caplog.text


def test_running_records_prunes_a_dead_process():
    live = door(record=True)
    stale = door(record=True)
    record = read(stale.record_path)
    record["pid"] = dead_pid()
    with open(stale.record_path, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    assert [r["session_id"] for r in records.running_records()] == [live.session.id]
    assert not os.path.exists(stale.record_path)


# --- murmur-wsgi token -------------------------------------------------------------------


def token(capsys, *args):
    status = cli.main(["token", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_token_prints_the_operator_token_and_a_newline(capsys):
    d = door(record=True)
    assert token(capsys) == (0, d.tokens.tokens["operator"] + "\n", "")
    assert token(capsys, "--credential", "operator") == (0, d.tokens.tokens["operator"] + "\n",
                                                         "")
    assert token(capsys, "--session", d.session.id) == (0, d.tokens.tokens["operator"] + "\n",
                                                        "")


@pytest.mark.parametrize("name", ["watcher", "reader"])
def test_token_prints_a_credentials_token(capsys, name):
    d = door(record=True)
    assert token(capsys, "--credential", name) == (0, d.tokens.tokens[name] + "\n", "")


def test_token_of_an_undeclared_credential_names_the_ones_minted(capsys):
    d = door(record=True)
    assert token(capsys, "--credential", "admin") == (
        2, "", f"murmur-wsgi: {d.session.id} minted no credential 'admin'; "
               "it has: operator, reader, watcher\n")


def test_token_of_a_public_door(capsys):
    d = door(auth=False, record=True)
    assert token(capsys) == (
        2, "", f"murmur-wsgi: {d.session.id} has a public door: its capsule declares no "
               "network.authentication, so it minted no token\n")


def test_token_with_nothing_running(capsys, home):
    assert token(capsys) == (
        2, "", f"murmur-wsgi: no session is running: no record under {home / 'running'}\n")


def test_token_with_two_sessions_running_asks_for_one(capsys):
    a, b = door(record=True), door(record=True)
    newest, oldest = sorted([a.session.id, b.session.id], reverse=True)
    assert token(capsys) == (
        2, "", f"murmur-wsgi: 2 sessions are running; name one with --session: "
               f"{newest}, {oldest}\n")
    assert token(capsys, "--session", a.session.id) == (0, a.tokens.tokens["operator"] + "\n",
                                                        "")


@pytest.mark.parametrize("session", ["ses_" + "0" * 32, "../../etc/passwd", "ses_x"])
def test_token_of_an_unknown_session(capsys, session):
    door(record=True)
    assert token(capsys, "--session", session) == (
        2, "", f"murmur-wsgi: no running session {session}\n")


def test_token_of_a_session_that_ended(capsys):
    d = door(record=True)
    d.close()
    assert token(capsys, "--session", d.session.id) == (
        2, "", f"murmur-wsgi: no running session {d.session.id}\n")


def test_serve_is_still_a_subcommand():
    args = cli.build_parser().parse_args(["serve", "--config", "x.yaml", "--listen", "h:1"])
    assert (args.func, args.config, args.listen) == (cli.serve, "x.yaml", "h:1")


def test_serve_refuses_a_root_through_a_symlink(tmp_path, monkeypatch, capsys):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(str(tmp_path / "elsewhere"), tmp_path / "out")
    (tmp_path / "murmur.yaml").write_text(
        "name: a\nversion: '1'\nexports: {files: {root: out/, mode: read-only}}\n")
    monkeypatch.chdir(tmp_path)
    status = cli.main(["serve", "--config", "murmur.yaml", "--listen", "127.0.0.1:1"])
    assert status == 2
    assert capsys.readouterr().err == (
        "murmur-wsgi: exports.files.root: 'out/' passes through the symlink out; "
        "the operator plane follows no symlink\n")
