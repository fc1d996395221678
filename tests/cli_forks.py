"""Many runs of ``python -m murmur_wsgi.cli ARGS`` for the price of one import.

``run_many(argvs, folder, timeout)`` starts one process (this file) that imports what the
CLI imports, then forks a child per argv that runs ``murmur_wsgi.cli`` as ``__main__``
(runpy, as ``python -m`` does) with its stdout and stderr on files of its own: each run's
``(returncode, stdout, stderr)``, as ``subprocess.run`` would give them.

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


def _main(request_path: str) -> None:
    import select
    import signal
    import time

    request = json.loads(Path(request_path).read_text())
    sys.path[0] = request["cwd"]                    # as ``python -m`` from that folder
    os.chdir(request["cwd"])
    __import__(MODULE)
    # NOTE: the module itself is forgotten (its imports stay): each child runs it fresh as
    # ``__main__``, as ``python -m`` does, and runpy does not warn of a module already
    # imported.
    del sys.modules[MODULE]
    package, _, name = MODULE.rpartition(".")
    delattr(sys.modules[package], name)
    sys.stdout.flush()
    sys.stderr.flush()
    folder = Path(request["folder"])
    started = time.monotonic()
    pids = []
    for i, argv in enumerate(request["argvs"]):
        pid = os.fork()
        if pid == 0:
            _child(argv, str(folder / f"run{i}.out"), str(folder / f"run{i}.err"))
        pids.append(pid)
    codes = []
    for pid in pids:
        fd = os.pidfd_open(pid)
        try:
            left = max(0.0, started + request["timeout"] - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
        finally:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
    print(json.dumps(codes))


if __name__ == "__main__":
    _main(sys.argv[1])
