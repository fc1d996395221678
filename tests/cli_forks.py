"""Many runs of ``python -m murmur_wsgi.cli ARGS`` for the price of one import.

``run_many(argvs, folder, timeout)`` starts one process (this file) that imports what the
CLI imports, then forks a child per argv that runs ``murmur_wsgi.cli`` as ``__main__``
(runpy, as ``python -m`` does) with its stdout and stderr on files of its own: each run's
``(returncode, stdout, stderr)``, as ``subprocess.run`` would give them. ``Forker`` is the
same process kept for runs one after another (``run``: a ``subprocess.run`` of one).

PERF: a ``python -m murmur_wsgi.cli`` spends 0.36 s of its 0.41 s CPU importing; a fork of
a process that imported it once spends a few milliseconds. What a fork cannot show (the
interpreter's start, the ``-m`` lookup) one real run beside it can: tests/door/test_manifest.py
compares one case both ways.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MODULE = "murmur_wsgi.cli"
# What the module imports only as it runs a command: ``serve``'s door (the forks run it).
COMMANDS = ("murmur_wsgi.door.cli",)


def run_many(argvs: list[list[str]], folder: Path, timeout: float,
             env: dict | None = None) -> list[tuple[int, bytes, bytes]]:
    """Each argv's ``(returncode, stdout, stderr)``; a run still going after ``timeout``
    (from its start) is killed (SIGKILL: returncode -9)."""
    folder.mkdir(parents=True, exist_ok=True)
    request = folder / "runs.json"
    request.write_text(json.dumps({"argvs": argvs, "folder": str(folder),
                                   "timeout": timeout, "cwd": os.getcwd()}))
    done = subprocess.run([sys.executable, __file__, str(request)], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout + 30)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    codes = json.loads(done.stdout)
    return [(code, (folder / f"run{i}.out").read_bytes(), (folder / f"run{i}.err").read_bytes())
            for i, code in enumerate(codes)]


class Forker:
    """One process that imported the CLI, in ``env``, forking a child per ``run``: the runs
    of ``python -m murmur_wsgi.cli`` one after another, each in a process of its own."""

    def __init__(self, folder: Path, env: dict | None = None):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.runs = 0
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(folder), os.getcwd()], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        """``subprocess.run([python, -m, murmur_wsgi.cli, *argv], capture_output=True,
        text=True)``, as its fork; a run still going after ``timeout`` is killed (-9)."""
        index, self.runs = self.runs, self.runs + 1
        self.proc.stdin.write(json.dumps({"argv": argv, "timeout": timeout,
                                          "index": index}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the forking process ended"
        out, err = (self.folder / f"run{index}.out", self.folder / f"run{index}.err")
        return subprocess.CompletedProcess(
            [sys.executable, "-m", MODULE, *argv], json.loads(line),
            out.read_bytes().decode(), err.read_bytes().decode())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)
        self.proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _exit_status(ex: SystemExit) -> int:
    """What the interpreter makes of a SystemExit leaving ``__main__``."""
    code = ex.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _child(argv: list[str], out: str, err: str) -> None:
    """In the fork: the module as ``__main__`` with ``argv``, then the process's end."""
    import runpy
    import traceback
    for fd, name in ((1, out), (2, err)):
        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    status = 0
    try:
        sys.argv = [MODULE, *argv]
        runpy.run_module(MODULE, run_name="__main__", alter_sys=True)
    except SystemExit as ex:
        status = _exit_status(ex)
    except BaseException:           # noqa: BLE001 - as the interpreter would print it
        traceback.print_exc()
        status = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:       # noqa: BLE001 - a closed stream: nothing to flush
                pass
        os._exit(status)


def _imported(cwd: str) -> None:
    """What ``python -m`` from ``cwd`` imports of the module, but the module itself."""
    sys.path[0] = cwd
    os.chdir(cwd)
    __import__(MODULE)
    for command in COMMANDS:
        __import__(command)
    # NOTE: the module itself is forgotten (its imports stay): each child runs it fresh as
    # ``__main__``, as ``python -m`` does, and runpy does not warn of a module already
    # imported.
    del sys.modules[MODULE]
    package, _, name = MODULE.rpartition(".")
    delattr(sys.modules[package], name)
    sys.stdout.flush()
    sys.stderr.flush()


def _fork(argv: list[str], folder: Path, index: int) -> int:
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        _child(argv, str(folder / f"run{index}.out"), str(folder / f"run{index}.err"))
    return pid


def _reap(pid: int, deadline: float) -> int:
    """The child's exit code (-9: killed at ``deadline``, a monotonic time)."""
    import select
    import signal
    import time
    fd = os.pidfd_open(pid)
    try:
        if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _main(request_path: str) -> None:
    import time
    request = json.loads(Path(request_path).read_text())
    _imported(request["cwd"])
    folder = Path(request["folder"])
    deadline = time.monotonic() + request["timeout"]
    pids = [_fork(argv, folder, i) for i, argv in enumerate(request["argvs"])]
    print(json.dumps([_reap(pid, deadline) for pid in pids]))


def _serve(folder: str, cwd: str) -> None:
    """A run for each line of stdin, its exit code a line of stdout, until stdin ends."""
    import time
    _imported(cwd)
    for line in sys.stdin:
        request = json.loads(line)
        deadline = time.monotonic() + request["timeout"]
        pid = _fork(request["argv"], Path(folder), request["index"])
        print(json.dumps(_reap(pid, deadline)), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        _serve(sys.argv[2], sys.argv[3])
    else:
        _main(sys.argv[1])
