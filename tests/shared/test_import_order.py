"""Importing the door loads no gevent: gunicorn's worker patches before it loads the app.

Ported from gunicorn's tests/workers/test_gevent_import_order.py. Each check runs in a
fresh interpreter, since this one may have imported gevent already.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

# The modules gunicorn loads itself, or that build an app at import: not imported here.
ENTRY_POINTS = {"murmur_wsgi.door.wsgi", "murmur_wsgi.door.gunicorn_conf", "murmur_wsgi.door.worker",
                "murmur_wsgi.serving.worker", "murmur_wsgi.hub.worker",
                "murmur_wsgi.wsgi", "murmur_wsgi.gunicorn_conf", "murmur_wsgi.worker"}

ALL_MODULES = textwrap.dedent("""
    import pkgutil
    import murmur_wsgi
    names = sorted(m.name for m in pkgutil.walk_packages(murmur_wsgi.__path__, "murmur_wsgi.")
                   if m.name not in {skip!r})
    for name in names:
        __import__(name)
    print(len(names))
""").format(skip=ENTRY_POINTS)


# PERF: a check's run is kept for the process: "every module" (2 s) serves
# test_no_gevent_on_import and test_every_module_is_imported alike.
@functools.lru_cache(maxsize=None)
def run(code: str) -> subprocess.CompletedProcess:
    check = code + textwrap.dedent("""
        import sys
        loaded = sorted(m for m in sys.modules if m == "gevent" or m.startswith("gevent."))
        assert not loaded, loaded
        import threading, _thread
        assert threading.Lock is _thread.allocate_lock, "threading is patched"
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_WSGI_")}
    with tempfile.TemporaryDirectory() as home:
        env["MURMUR_WSGI_HOME"] = home          # nothing here writes a record; if it did
        return subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                              timeout=60, env=env, cwd=home)


@pytest.mark.parametrize("code", [
    pytest.param("import murmur_wsgi\n", id="murmur_wsgi"),
    pytest.param("import murmur_wsgi.door.app\n", id="murmur_wsgi.door.app"),
    pytest.param("from murmur_wsgi import create_app\n"
                 "create_app({'name': 'a', 'version': '1'}, listen='127.0.0.1:41873')\n",
                 id="create_app"),
    pytest.param("import murmur_wsgi.cli\n", id="murmur_wsgi.cli"),
    pytest.param(ALL_MODULES, id="every module"),
])
def test_no_gevent_on_import(code):
    result = run(code)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


def test_every_module_is_imported():
    result = run(ALL_MODULES)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[0]) >= 10        # the walk found the package's modules


def test_the_command_loads_no_http_client_until_a_client_command_runs():
    """``murmur-wsgi serve`` and ``hub`` start without ``requests``: the client's classes
    are imported when first named (``murmur_wsgi.client``), and then as before."""
    check = textwrap.dedent("""
        import sys
        import murmur_wsgi.cli
        assert "requests" not in sys.modules, "the command imported requests"
        from murmur_wsgi.client import A2AClient, DoorClient, EventStream
        assert A2AClient.__module__ == "murmur_wsgi.client.agent"
        assert EventStream.__module__ == "murmur_wsgi.client.streams"
        assert "requests" in sys.modules
        import murmur_wsgi.client as client
        try:
            client.NoSuchName
        except AttributeError as ex:
            assert "NoSuchName" in str(ex)
        else:
            raise AssertionError("an unknown name was found")
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
