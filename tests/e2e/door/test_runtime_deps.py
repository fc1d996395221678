"""`make run`'s install (runtime dependencies only) can load gunicorn's gevent worker."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.conftest import REPO

pytestmark = pytest.mark.e2e


def test_runtime_install_loads_the_gevent_worker_and_the_door(tmp_path):
    # NOTE: a venv without pip of its own (ensurepip takes seconds): this interpreter's pip
    # installs into it (``--python``), the same packages, not compiled to bytecode ahead.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "-q", "--no-compile", str(REPO)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = ("import gunicorn.workers.ggevent, murmur_wsgi.door.app, murmur_wsgi.door.gunicorn_conf; "
             "print('ok')")
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                          timeout=60, check=False, cwd=tmp_path)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
