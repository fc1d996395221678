"""Background commands running at once: at most ``capabilities.shell.max_running`` a session."""
from __future__ import annotations

import os

import pytest

from murmur_wsgi.door.manifest import ManifestError, load_manifest
from tests.agents_util import status_text
from tests.conftest import Rpc, make_door
from tests.tasks_util import DEADLINE, send_params

REFUSED = ("background command refused: {} commands are running already "
           "(capabilities.shell.max_running)")


def shell_door(**shell):
    return make_door(capabilities={"shell": {"allow": ["sleep", "true"], **shell}})


@pytest.fixture
def rpc(request):
    door = shell_door(**getattr(request, "param", {}))
    yield Rpc(door)
    door.close()


def run(rpc, text):
    return rpc.result("SendMessage", send_params(text))["task"]


@pytest.mark.parametrize("rpc", [{"max_running": 3}], indirect=True)
def test_a_command_past_max_running_fails_its_task_and_starts_nothing(rpc):
    for _ in range(3):
        assert run(rpc, "/background sleep 30")["status"]["state"] == "TASK_STATE_COMPLETED"
    refused = run(rpc, "/background sleep 30")
    assert refused["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(refused) == REFUSED.format(3)
    assert len(rpc.door.session.works.running()) == 3


@pytest.mark.parametrize("rpc", [{"max_running": 1}], indirect=True)
def test_a_command_that_ended_gives_its_place_back(rpc):
    assert run(rpc, "/background true")["status"]["state"] == "TASK_STATE_COMPLETED"
    for work in rpc.door.session.works.running():      # none once it has ended
        work.proc.wait(DEADLINE)
    assert run(rpc, "/background sleep 30")["status"]["state"] == "TASK_STATE_COMPLETED"
    assert status_text(run(rpc, "/background sleep 30")) == REFUSED.format(1)


def test_by_default_sixteen_run_at_once(rpc):
    tasks = [run(rpc, "/background sleep 30") for _ in range(17)]
    assert [t["status"]["state"] for t in tasks] == ["TASK_STATE_COMPLETED"] * 16 + [
        "TASK_STATE_FAILED"]
    assert status_text(tasks[-1]) == REFUSED.format(16)


@pytest.mark.parametrize("value", [0, -1, "many"])
def test_max_running_is_at_least_one(value):
    with pytest.raises(ManifestError, match="capabilities.shell.max_running"):
        load_manifest({"name": "a", "version": "1",
                       "capabilities": {"shell": {"allow": ["sleep"], "max_running": value}}})


def test_a_command_that_could_not_start_gives_its_place_back(tmp_path, monkeypatch, caplog):
    broken = tmp_path / "broken"          # on PATH, executable, its interpreter missing
    broken.write_text("#!/nonexistent/interpreter\n", encoding="utf-8")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ.get('PATH', '')}")
    door = make_door(capabilities={"shell": {"allow": ["broken", "sleep"], "max_running": 1}})
    try:
        rpc = Rpc(door)
        for _ in range(2):
            failed = run(rpc, "/background broken")
            assert status_text(failed) == ("background command refused: broken could not "
                                           "start: No such file or directory")
        assert run(rpc, "/background sleep 30")["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        door.close()


@pytest.mark.parametrize("rpc", [{"max_running": 1}], indirect=True)
def test_a_command_holding_nul_is_refused_in_one_line(rpc, caplog):
    failed = run(rpc, "/background sleep 1\x00")
    assert status_text(failed) == "background command refused: the command holds a NUL character"
    assert not [r for r in caplog.records if r.exc_info], caplog.records
    assert run(rpc, "/background sleep 30")["status"]["state"] == "TASK_STATE_COMPLETED"


LONG = ("background command refused: the command is longer than {} bytes "
        "(capabilities.shell.max_command_bytes)")


def test_a_command_past_max_command_bytes_fails_its_task_unsplit(rpc):
    """Splitting a command takes time growing with the square of its longest word, on the
    worker's loop: a 1 MB one held every other request 10 s. Past 64 KiB, it is not split."""
    longest = "sleep 30" + " 0" * 32764                    # 64 KiB: 30 seconds in all
    assert len(longest) == 64 * 1024
    assert run(rpc, f"/background {longest}")["status"]["state"] == "TASK_STATE_COMPLETED"
    failed = run(rpc, f"/background {longest[:-2]} 00")
    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(failed) == LONG.format(64 * 1024)
    assert len(rpc.door.session.works.running()) == 1


@pytest.mark.parametrize("rpc", [{"max_command_bytes": 12}], indirect=True)
def test_max_command_bytes_counts_utf8_bytes(rpc):
    assert status_text(run(rpc, "/background sleep 30 éé")) == LONG.format(12)   # 13 bytes
    assert run(rpc, "/background sleep 30 é")["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("value", [0, -1, "many"])
def test_max_command_bytes_is_at_least_one(value):
    with pytest.raises(ManifestError, match="capabilities.shell.max_command_bytes"):
        load_manifest({"name": "a", "version": "1",
                       "capabilities": {"shell": {"allow": ["sleep"],
                                                  "max_command_bytes": value}}})
