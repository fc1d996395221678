"""``murmur-wsgi serve --dev``: the whole door on Werkzeug's threaded server, real threads.

Held SendMessage, a SendStreamingMessage stream, murmur.WatchSession, CancelTask,
the JSON access log, then SIGTERM: the held request is answered, the watch
ends with ``capsule-closed``, the process exits and removes its record.
"""
from __future__ import annotations

import contextlib
import json
import sys
import threading
import time

import pytest
import requests

from tests.e2e.conftest import (CLOSE, DoorProcess, child_env, default_manifest, free_port,
                                serve_argv, session_id_of, spawn, wait_for_card,
                                write_manifest)
from tests.e2e.door.test_shutdown import EXT, HEADERS, SETTLE, STOP_WITHIN, HttpStream, message, rpc

pytestmark = pytest.mark.e2e

START_DEADLINE = 20.0


@contextlib.contextmanager
def dev_door(tmp_path, manifest: dict):
    port = free_port()
    manifest = {**manifest, "network": {"host": "127.0.0.1", "internal_port": port}}
    path = write_manifest(tmp_path, manifest)
    home = tmp_path / "home"
    proc = spawn(serve_argv(path, f"127.0.0.1:{port}") + ["--dev"], tmp_path / "dev.log",
                 child_env(MURMUR_WSGI_HOME=str(home)))
    door = DoorProcess(url=f"http://127.0.0.1:{port}", manifest_path=path, proc=proc,
                       log_path=tmp_path / "dev.log", home=home)
    try:
        door.card = wait_for_card(door, time.monotonic() + START_DEADLINE)
        door.session_id = session_id_of(door.card)
        yield door
    finally:
        door.stop(timeout=STOP_WITHIN + 5)


def post(door, method: str, params: dict) -> dict:
    response = requests.post(door.url + "/", data=rpc(method, params),
                             headers={**HEADERS, **CLOSE}, timeout=SETTLE)
    assert response.status_code == 200
    return response.json()["result"]


class Held(threading.Thread):
    """A held SendMessage on its own thread; ``task`` is its answer."""

    def __init__(self, door, text: str):
        super().__init__(daemon=True)
        self.door, self.text, self.task = door, text, None

    def run(self):
        response = requests.post(self.door.url + "/", data=rpc("SendMessage", message(self.text)),
                                 headers={**HEADERS, **CLOSE}, timeout=SETTLE + STOP_WITHIN)
        self.task = response.json()["result"]["task"]

    def answer(self) -> dict:
        self.join(SETTLE + STOP_WITHIN)
        assert not self.is_alive() and self.task is not None
        return self.task


def next_task(watch: HttpStream, seen: set, state: str) -> str:
    """Read the watch until a task not in ``seen`` reaches ``state``; return its id."""
    while True:
        event = watch.next()
        assert event is not None, "the watch ended"
        if event.state == state and event.task_id not in seen:
            seen.add(event.task_id)
            return event.task_id


def threads_of(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        return int(next(line for line in fh if line.startswith("Threads:")).split()[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_whole_door_on_the_dev_server(tmp_path):
    manifest = dict(default_manifest(), lifecycle={"task_acceptance": "queue", "queue_depth": 4},
                    stream={"heartbeat_secs": 1}, observability={"access_log": True})
    with dev_door(tmp_path, manifest) as door:
        assert door.card["supportedInterfaces"][0]["url"] == f"http://localhost:{door.port}"
        watch = HttpStream(door.url, "murmur.WatchSession", {})
        assert watch.next().frame_name == "connection-ack"
        seen: set = set()

        # A held request, and a stream queued behind it: each on its own server thread.
        slept = Held(door, "/sleep 0.3\nslept")
        slept.start()
        next_task(watch, seen, "TASK_STATE_WORKING")
        assert threads_of(door.proc.pid) >= 4        # main, watch, held request, agent
        stream = HttpStream(door.url, "SendStreamingMessage", message("/stream 3"), EXT)
        events = stream.rest()
        assert [e.kind if e.frame_name is None else e.frame_name for e in events] == [
            "task", "connection-ack", "statusUpdate", "text", "text", "text",
            "artifactUpdate", "statusUpdate"]
        assert events[-1].state == "TASK_STATE_COMPLETED"
        task = slept.answer()
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"][0]["text"] == "slept"
        seen.add(events[0].task_id)

        # CancelTask answers the held request of the task it cancels.
        doomed = Held(door, "/sleep 60")
        doomed.start()
        doomed_id = next_task(watch, seen, "TASK_STATE_WORKING")
        canceled = post(door, "CancelTask", {"id": doomed_id})
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        assert doomed.answer()["status"]["state"] == "TASK_STATE_CANCELED"

        # SIGTERM: the held request is answered as its task stands, the watch closes.
        last = Held(door, "/sleep 60")
        last.start()
        last_id = next_task(watch, seen, "TASK_STATE_WORKING")
        begun = time.monotonic()
        seconds = door.stop(timeout=STOP_WITHIN)
        assert door.proc.returncode == 0
        assert time.monotonic() - begun < STOP_WITHIN
        answer = last.answer()
        assert (answer["id"], answer["status"]["state"]) in {
            (last_id, "TASK_STATE_WORKING"), (last_id, "TASK_STATE_CANCELED")}
        assert watch.rest()[-1].frame_name == "capsule-closed"
    print(f"\ndev server: SIGTERM to exit with a held request and a stream: {seconds:.2f}s")
    assert not (door.home / "running" / f"{door.session_id}.json").exists()
    access = [json.loads(line) for line in door.log().splitlines()
              if line.startswith("{") and '"murmur_wsgi.access"' in line]
    assert {"murmur.WatchSession", "SendMessage", "SendStreamingMessage", "CancelTask"} <= \
        {line["method"] for line in access}


def test_after_task_exit_stops_the_dev_server():
    from murmur_wsgi import create_app
    from murmur_wsgi.serving.devserver import DevServer

    door = create_app({"name": "once", "version": "0.1.0", "lifecycle": {"after_task": "exit"}})
    dev = DevServer(door, "127.0.0.1", 0)
    serving = threading.Thread(target=dev.serve_forever, daemon=True)
    serving.start()
    url = f"http://127.0.0.1:{dev.port}/"
    response = requests.post(url, data=rpc("SendMessage", message("only one")),
                             headers={**HEADERS, **CLOSE}, timeout=SETTLE)
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert dev.stopped.wait(SETTLE)
    serving.join(SETTLE)
    assert not serving.is_alive()
    assert door.session.closing
    with pytest.raises(requests.ConnectionError):
        requests.get(url, timeout=SETTLE)
