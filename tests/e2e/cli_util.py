"""``murmur-wsgi`` run in-process by the e2e tests, with no ambient agent or credential."""
from __future__ import annotations

from murmur_wsgi.cli import main

AMBIENT = ("MURMUR_DOOR_URL", "MURMUR_DOOR_TOKEN", "MURMUR_API_KEY", "MURMUR_TENANT")


def no_ambient_agent(monkeypatch, home) -> None:
    """A fresh ``$MURMUR_WSGI_HOME`` and none of the variables that name an agent or a key."""
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(home))
    for name in AMBIENT:
        monkeypatch.delenv(name, raising=False)


def run_cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    """``murmur-wsgi ARGV`` -> ``(status, stdout, stderr)``."""
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def check_send_ps_cancel(cli, text: str) -> None:
    """``send`` held, ``send --no-wait`` of a long task, ``ps --state working``, ``get``,
    ``cancel`` and ``get`` again, through ``cli(*argv)`` against any A2A agent."""
    assert cli("send", text) == (0, f"{text}\n", "")
    status, out, err = cli("send", "--no-wait", "/sleep 30")
    assert status == 0, err
    task_id = out.strip()
    assert err.startswith(f"murmur-wsgi: task {task_id} is ")
    status, out, _ = cli("ps", "--state", "working")
    assert status == 0 and task_id in out
    status, out, _ = cli("get", task_id)
    assert status == 0 and out.splitlines()[:1] == [f"task:     {task_id}"]
    status, out, _ = cli("cancel", task_id)
    assert status == 0 and out.splitlines()[:2] == [f"task:     {task_id}", "state:    canceled"]
    status, out, _ = cli("get", task_id)
    assert status == 1 and "canceled" in out
