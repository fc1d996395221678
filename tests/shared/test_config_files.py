"""A configuration path that is not a regular file: both commands exit 2 with one line, at once.

``murmur-wsgi serve --config``, ``murmur-wsgi hub --config`` and ``hub key`` read
their file through ``loading.read_yaml``. A FIFO (a named pipe no one writes) or
a device (``/dev/zero``: endless) must be refused before it is read, never waited
on or read without end. Each command runs in a thread joined with a deadline; a
command that hangs on a FIFO is released by opening the FIFO's other end.
"""
from __future__ import annotations

import os
import sys
import threading

import pytest

from murmur_wsgi.cli import main
from murmur_wsgi.loading import read_yaml

DEADLINE = 10.0        # seconds: the refusal takes milliseconds; a hang is what fails


def run_cli(argv: list[str], fifo: str | None = None) -> int | None:
    """``main(argv)``'s status, or None when it had not returned by the deadline."""
    status: list = []
    thread = threading.Thread(target=lambda: status.append(main(argv)), daemon=True)
    thread.start()
    thread.join(DEADLINE)
    if thread.is_alive() and fifo is not None:
        # Release the reader: an open writer that closes at once gives it end of file.
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(DEADLINE)
        return None
    return status[0] if status else None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.parametrize("argv", [["serve"], ["hub"], ["hub", "key", "acme"]],
                         ids=["serve", "hub", "hub-key"])
def test_a_fifo_as_the_config_exits_2_at_once(tmp_path, capsys, argv):
    fifo = str(tmp_path / "config.yaml")
    os.mkfifo(fifo)
    status = run_cli([*argv, "--config", fifo], fifo)
    err = capsys.readouterr().err
    assert status == 2, f"status {status} (None: still reading the FIFO after {DEADLINE} s)"
    assert err == f"murmur-wsgi: {fifo}: is not a regular file\n"


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
@pytest.mark.parametrize("argv", [["serve"], ["hub"]], ids=["serve", "hub"])
def test_a_device_as_the_config_exits_2(capsys, argv):
    status = run_cli([*argv, "--config", "/dev/zero"])
    err = capsys.readouterr().err
    assert status == 2
    assert err == "murmur-wsgi: /dev/zero: is not a regular file\n"


def test_a_directory_as_the_config_exits_2(tmp_path, capsys):
    assert run_cli(["hub", "--config", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"murmur-wsgi: {tmp_path}: ")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="no /proc")
def test_a_directory_is_refused_as_not_a_regular_file_and_left_closed(tmp_path):
    class Refused(Exception):
        pass

    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):           # hub/keys.py reads hub.yaml again at each poll
        with pytest.raises(Refused) as refused:
            read_yaml(str(tmp_path), Refused)
        assert str(refused.value) == f"{tmp_path}: is not a regular file"
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize("argv", [["serve"], ["hub"]], ids=["serve", "hub"])
def test_a_config_nested_past_the_parser_s_recursion_exits_2(tmp_path, capsys, argv):
    # NOTE: before, the parser's RecursionError left the command with a traceback.
    path = tmp_path / "config.yaml"
    # PERF: as many levels as the recursion limit's frames (each level takes the parser
    # two): past it with room, and PyYAML's scanner, quadratic in the depth, scans half
    # the 2,000 levels this had (0.8 s of CPU, not 1.3 s).
    depth = sys.getrecursionlimit()
    path.write_text("name: " + "[" * depth + "]" * depth)
    assert run_cli([*argv, "--config", str(path)]) == 2
    assert capsys.readouterr().err == f"murmur-wsgi: {path}: nests too deeply to be read\n"
