"""The hub mounted under a prefix (Flask's DispatcherMiddleware, Django): ``mount_path``
makes the cards announce the URLs the hub answers on, fetched and called through them."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from flask import Flask
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.test import Client

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config import ConfigError, load_config
from tests.hub.conftest import sha

REPO = Path(__file__).resolve().parents[2]
DJANGO_DIR = REPO / "examples" / "django_project"
KEY = "mhk_mounted-key"
HEADERS = {"X-API-Key": KEY, "A2A-Version": "1.0"}


def config(mount_path: str) -> dict:
    return {"public_url": "https://example.com", "mount_path": mount_path,
            "tenants": {"acme": {"api_keys": [sha(KEY)],
                                 "agents": {"echo": {"agent": "demo", "publish": True}}}}}


def card_and_call(client: Client, card_path: str) -> tuple[str, dict]:
    """The card's interface URL, and SendMessage posted to that URL's path."""
    card = client.get(card_path, headers=HEADERS)
    assert card.status_code == 200, card.get_data(as_text=True)
    url = card.get_json()["supportedInterfaces"][0]["url"]
    answer = client.post(urlsplit(url).path, headers=HEADERS, json={
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER",
                               "parts": [{"text": "mounted"}]}}})
    return url, answer.get_json()


@pytest.fixture
def hub():
    app = create_hub(config("/hub"))
    yield app
    app.close(0)


def test_flask_dispatcher_middleware(hub):
    site = Flask(__name__)
    site.wsgi_app = DispatcherMiddleware(site.wsgi_app, {"/hub": hub})
    url, answer = card_and_call(site.test_client(),
                                "/hub/a2a/v1/agents/echo/.well-known/agent-card.json")
    assert url == "https://example.com/hub/a2a/v1/agents/echo"
    assert answer["result"]["task"]["artifacts"][0]["parts"][0]["text"] == "mounted"


def test_django_mount(hub):
    sys.path.insert(0, str(DJANGO_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djsite.settings")
    try:
        from django.core.wsgi import get_wsgi_application
        from djsite.a2a import MountDoor

        application = MountDoor(get_wsgi_application(), hub, "/hub")
        url, answer = card_and_call(Client(application),
                                    "/hub/a2a/v1/agents/echo/.well-known/agent-card.json")
        assert Client(application).get("/health").get_json() == {"ok": True}
    finally:
        sys.path.remove(str(DJANGO_DIR))
    assert url == "https://example.com/hub/a2a/v1/agents/echo"
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_default_is_the_root():
    app = create_hub(config(""))
    try:
        url, _ = card_and_call(Client(app), "/a2a/v1/agents/echo/.well-known/agent-card.json")
    finally:
        app.close(0)
    assert url == "https://example.com/a2a/v1/agents/echo"


def test_the_environment_sets_it_and_a_final_slash_is_dropped():
    loaded = load_config({}, environ={"MURMUR_HUB_MOUNT_PATH": "/apps/hub/"})
    assert loaded.mount_path == "/apps/hub"


@pytest.mark.parametrize("value", ["hub", "/hub?x=1", "/a/../b", "//hub", "/h b"])
def test_a_mount_path_that_is_not_a_path_names_the_key(value):
    with pytest.raises(ConfigError) as info:
        load_config({"mount_path": value}, environ={})
    assert str(info.value).startswith("mount_path: ")


def test_an_internationalized_host_is_announced_in_its_ascii_form():
    """``public_url`` takes an internationalized host (``bücher.example``); the card
    announced it as it was, not a URL (RFC 3986), and a client sending to it reached an
    address of its own spelling. Now its ASCII form (IDNA); the mount path and names are
    URL characters already (the config refuses others)."""
    app = create_hub({**config("/hub"), "public_url": "https://b\u00fccher.example:8443"})
    try:
        card = Client(app).get("/a2a/v1/agents/echo/.well-known/agent-card.json",
                               headers=HEADERS)
    finally:
        app.close(0)
    assert card.get_json()["supportedInterfaces"][0]["url"] == (
        "https://xn--bcher-kva.example:8443/hub/a2a/v1/agents/echo")


def test_docs_django_snippet_serves_the_hub_as_written(tmp_path):
    """docs/deploy.md's Django mount, run as printed (its hub.yaml ours) in a process whose
    environment names no Django settings, as a new project's gunicorn worker starts."""
    text = (REPO / "docs" / "deploy.md").read_text(encoding="utf-8")
    snippet = re.search(r"```python\n(# Django .*?)```", text, re.S).group(1)
    (tmp_path / "hub.yaml").write_text(json.dumps(config("/hub")), encoding="utf-8")
    snippet = snippet.replace("/etc/murmur/hub.yaml", str(tmp_path / "hub.yaml"))
    probe = snippet + textwrap.dedent("""
        from werkzeug.test import Client
        card = Client(application).get("/hub/a2a/v1/agents/echo/.well-known/agent-card.json",
                                       headers={"X-API-Key": %r})
        print(card.status_code, card.get_json()["supportedInterfaces"][0]["url"])
    """) % KEY
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(DJANGO_DIR), str(REPO)])
    run = subprocess.run([sys.executable, "-c", probe], cwd=DJANGO_DIR, env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["200", "https://example.com/hub/a2a/v1/agents/echo"]
