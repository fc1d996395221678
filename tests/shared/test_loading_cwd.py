"""An agent named ``module:attr`` is importable from the directory the process started in.

gunicorn puts its cwd on ``sys.path``; ``flask run`` with an app file in another
directory does not. Here Flask's own CLI (the ``flask`` console script, whose
``sys.path`` holds the app file's directory and not the cwd) loads an app file
from one temporary directory while started in another that holds the agent's
module: the hub's config and the door's manifest both find it.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from murmur_wsgi.agents import AgentLoadError
from murmur_wsgi.loading import import_callable

FLASK = Path(sys.executable).parent / "flask"
REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0                  # seconds for Flask's CLI to load the app and list its routes

AGENT = "def agent(ctx):\n    return 'from the cwd'\n"

SITE = textwrap.dedent("""\
    import os
    from flask import Flask
    from werkzeug.middleware.dispatcher import DispatcherMiddleware
    from murmur_wsgi import create_app
    from murmur_wsgi.hub import create_hub

    here = os.path.dirname(os.path.abspath(__file__))
    app = Flask(__name__)
    hub = create_hub(os.path.join(here, "hub.yaml"))
    door = create_app(os.path.join(here, "murmur.yaml"), listen="127.0.0.1:41873", record=False)
    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {"/hub": hub, "/door": door})
    print("loaded", flush=True)
""")


@pytest.fixture
def started_elsewhere(tmp_path):
    """(the app's directory, the cwd holding ``cwd_agents/local.py``)."""
    site, cwd = tmp_path / "site", tmp_path / "cwd"
    (cwd / "cwd_agents").mkdir(parents=True)
    site.mkdir()
    (cwd / "cwd_agents" / "__init__.py").write_text("")
    (cwd / "cwd_agents" / "local.py").write_text(AGENT)
    (site / "site_app.py").write_text(SITE)
    (site / "hub.yaml").write_text(yaml.safe_dump({
        "public_url": "http://127.0.0.1:41880",
        "tenants": {"acme": {"api_keys": ["0" * 64],
                             "agents": {"local": {"agent": "cwd_agents.local:agent"}}}}}))
    (site / "murmur.yaml").write_text(yaml.safe_dump({"name": "cwd-door", "version": "0.1.0",
                                                   "agent": "cwd_agents.local:agent"}))
    return site, cwd


def flask_routes(site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": str(FLASK.parent), "PYTHONPATH": str(REPO), "HOME": str(cwd)}
    return subprocess.run([str(FLASK), "--app", str(site / "site_app.py"), "routes"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def test_flask_cli_loads_agents_from_the_directory_it_started_in(started_elsewhere):
    site, cwd = started_elsewhere
    done = flask_routes(site, cwd)
    assert done.returncode == 0, done.stderr
    assert "loaded" in done.stdout.splitlines()


def test_a_module_in_neither_place_is_one_line(started_elsewhere, monkeypatch):
    _, cwd = started_elsewhere
    monkeypatch.chdir(cwd)
    with pytest.raises(AgentLoadError) as info:
        import_callable("no_such_cwd_module:agent", "agent", AgentLoadError)
    assert str(info.value) == ("agent: cannot import no_such_cwd_module: "
                               "No module named 'no_such_cwd_module'")


def test_a_missing_dependency_inside_the_module_is_not_retried(tmp_path, monkeypatch):
    (tmp_path / "needs_missing.py").write_text("import not_installed_anywhere\n"
                                               "def agent(ctx):\n    return 1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    with pytest.raises(AgentLoadError) as info:
        import_callable("needs_missing:agent", "agent", AgentLoadError)
    assert "No module named 'not_installed_anywhere'" in str(info.value)
    sys.modules.pop("needs_missing", None)
