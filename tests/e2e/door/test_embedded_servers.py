"""The embedding examples on real servers: Flask under gunicorn -k gevent, Django on Werkzeug.

The Flask site runs as docs/deploy.md says, ``gunicorn -c conf/gunicorn.conf.py
'examples.flask_app:create_app()'``: the door's shutdown hooks find the door inside
the Flask app. The Django site runs on Werkzeug's threaded server in this process.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from werkzeug.serving import make_server

from murmur_wsgi.uris import CARD_PATH
from tests.e2e.conftest import (CLOSE, REPO, DoorProcess, child_env, free_port, http_get,
                                spawn, wait_for_card, write_manifest)
from tests.e2e.door.test_shutdown import EXT, HEADERS, SETTLE, STOP_WITHIN, HttpStream, message, rpc

pytestmark = pytest.mark.e2e

DJANGO_DIR = REPO / "examples" / "django_project"
MANIFEST = {"name": "mounted", "version": "0.1.0", "stream": {"heartbeat_secs": 1}}


def post(url: str, method: str, params: dict) -> dict:
    response = requests.post(url, data=rpc(method, params), headers={**HEADERS, **CLOSE},
                             timeout=SETTLE)
    assert response.status_code == 200, response.text
    return response.json()["result"]


def test_flask_site_under_gunicorn(tmp_path: Path):
    port = free_port()
    path = write_manifest(tmp_path, MANIFEST)
    argv = [sys.executable, "-m", "gunicorn", "-c", "conf/gunicorn.conf.py",
            "-b", f"127.0.0.1:{port}", "examples.flask_app:create_app()"]
    base = f"http://127.0.0.1:{port}"
    proc = spawn(argv, tmp_path / "flask.log",
                 child_env(MURMUR_WSGI_CONFIG=str(path), MURMUR_WSGI_HOME=str(tmp_path)))
    # The door's URL is the mount: its card is under it.
    door = DoorProcess(url=base + "/a2a", manifest_path=path, proc=proc,
                       log_path=tmp_path / "flask.log")
    try:
        card = wait_for_card(door, time.monotonic() + 20)
        assert card["supportedInterfaces"][0]["url"] == f"http://127.0.0.1:{port}/a2a"
        assert http_get(base + "/").json() == {"site": "flask example", "a2a": "/a2a"}
        task = post(base + "/a2a", "SendMessage", message("through flask"))["task"]
        assert task["artifacts"][0]["parts"][0]["text"] == "through flask"
        stream = HttpStream(base + "/a2a", "SendStreamingMessage", message("/stream 2"), EXT)
        assert stream.rest()[-1].state == "TASK_STATE_COMPLETED"
        watch = HttpStream(base + "/a2a", "murmur.WatchSession", {})
        assert watch.next().frame_name == "connection-ack"
        seconds = door.stop(timeout=STOP_WITHIN)
        assert watch.rest()[-1].frame_name == "capsule-closed"
    finally:
        door.stop(timeout=STOP_WITHIN)
    assert proc.returncode == 0
    assert seconds < STOP_WITHIN


@pytest.fixture
def django_server():
    sys.path.insert(0, str(DJANGO_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djsite.settings")
    try:
        from djsite.a2a import build_application

        application = build_application(dict(MANIFEST))
        server = make_server("127.0.0.1", 0, application, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_port}", application.door
        finally:
            application.door.close()
            server.shutdown()
            server.server_close()
            thread.join(SETTLE)
            assert not thread.is_alive()
    finally:
        sys.path.remove(str(DJANGO_DIR))


def test_django_site_on_werkzeug(django_server):
    base, door = django_server
    card = http_get(base + "/a2a" + CARD_PATH).json()
    assert card["supportedInterfaces"][0]["url"] == base + "/a2a"
    assert http_get(base + "/health").json() == {"ok": True}
    answers = []
    held = threading.Thread(target=lambda: answers.append(
        post(base + "/a2a", "SendMessage", message("/sleep 0.2\nheld"))))
    held.start()
    watch = HttpStream(base + "/a2a", "murmur.WatchSession", {})
    assert watch.next().frame_name == "connection-ack"
    held.join(SETTLE)
    assert not held.is_alive()
    assert answers[0]["task"]["artifacts"][0]["parts"][0]["text"] == "held"
    door.close()
    assert watch.rest()[-1].frame_name == "capsule-closed"
    # NOTE: the site leaves its process's clock on UTC: without a TIME_ZONE, Django applies
    # its default, America/Chicago, to the process (time.tzset), and gunicorn's worker
    # logged its lines at -0600 beside its master's +0000.
    assert time.strftime("%z", time.localtime(0)) == "+0000"
