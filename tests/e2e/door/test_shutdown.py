"""Stopping a real ``murmur-wsgi serve`` (gunicorn -k gevent): SIGTERM and ``after_task: exit``.

SIGTERM with held requests, open streams, a background command and an idle
keep-alive connection: the held requests are answered with their task as it
stands, every stream with the stream extension ends with ``capsule-closed``,
the background command is killed and gunicorn exits well within its
``graceful_timeout``, leaving no process behind.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from murmur_wsgi.door import gunicorn_conf
from murmur_wsgi.uris import STREAM_URI
from tests.e2e.conftest import CLOSE, start_door
from tests.sse_util import parse_block

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}
EXT = {"A2A-Extensions": STREAM_URI}
SETTLE = 10.0                  # seconds any one wait below may take
STOP_WITHIN = 10.0             # "well within" graceful_timeout (30 s)

# The process that imported this module: the worker, when gunicorn's worker loads it as
# the door's agent (below); the master would have, were the app preloaded.
IMPORTED_IN = os.getpid()


def worker_facts(ctx) -> str:
    """An agent (``tests.e2e.door.test_shutdown:worker_facts``): where its session was built."""
    lock = ctx._port.store.lock              # the door's port (tasks/agent_calls.py)
    inner = getattr(lock, "_block", lock)      # a Python RLock wraps the lock it was given
    return json.dumps({"imported_in": IMPORTED_IN, "pid": os.getpid(), "ppid": os.getppid(),
                       "lock": type(inner).__module__})


def background(master_pid: int, seconds: int) -> tuple[str, str]:
    """A command line no other process has, while the door's master (gunicorn) runs: other
    test suites on the machine may run this test at the same time, each its own door."""
    return ("sleep", f"{seconds}.{master_pid}")


def rpc(method: str, params: dict, request_id=1) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def message(text: str) -> dict:
    return {"message": {"messageId": f"m-{time.monotonic_ns()}", "role": "ROLE_USER",
                        "parts": [{"text": text}]}}


class HttpStream:
    """An SSE answer read over a real connection, event by event (tests.sse_util's checks)."""

    def __init__(self, url: str, method: str, params: dict, headers=None):
        self.response = requests.post(url + "/", data=rpc(method, params),
                                      headers={**HEADERS, **CLOSE, **(headers or {})},
                                      stream=True, timeout=(5, SETTLE))
        assert self.response.status_code == 200
        assert self.response.headers["Content-Type"] == "text/event-stream"
        self._lines = self.response.iter_lines()
        self.events = []

    def next(self):
        """The next event (heartbeats skipped), or None once the body ended."""
        block = []
        for line in self._lines:
            if line:
                block.append(line.decode())
                continue
            event = parse_block("\n".join(block), 1) if block else None
            block = []
            if event is not None:
                self.events.append(event)
                return event
        assert not block, block
        return None

    def rest(self) -> list:
        while self.next() is not None:
            pass
        self.response.close()
        return self.events


def next_submitted(watch: HttpStream, seen: set) -> str:
    """Read the watch until a task not in ``seen`` is submitted; return its id."""
    while True:
        event = watch.next()
        assert event is not None, "the watch ended"
        if event.state == "TASK_STATE_SUBMITTED" and event.task_id not in seen:
            seen.add(event.task_id)
            return event.task_id


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
        return [int(p) for p in fh.read().split()]


def pids_running(argv: tuple[str, ...]) -> list[int]:
    """Processes whose command line is ``argv`` (its program named by path or by name)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode().split("\0")[:-1]
            except (OSError, UnicodeDecodeError):
                continue
            if cmdline and (os.path.basename(cmdline[0]), *cmdline[1:]) == argv:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigterm_answers_held_requests_ends_streams_and_exits_fast(tmp_path):
    manifest = {"name": "closing", "version": "0.1.0",
                "lifecycle": {"task_acceptance": "queue", "queue_depth": 8},
                "capabilities": {"shell": {"allow": ["sleep"]}},
                "stream": {"heartbeat_secs": 1}}
    with start_door(tmp_path, manifest) as door:
        [worker] = children(door.proc.pid)
        command = background(door.proc.pid, 987)
        watch = HttpStream(door.url, "murmur.WatchSession", {})
        assert watch.next().frame_name == "connection-ack"
        started = requests.post(door.url + "/", data=rpc("SendMessage", message(
            "/background " + " ".join(command))), headers={**HEADERS, **CLOSE}, timeout=SETTLE)
        background_task = started.json()["result"]["task"]
        assert background_task["status"]["state"] == "TASK_STATE_COMPLETED"
        [background_pid] = pids_running(command)
        seen = {background_task["id"]}

        answers = {}

        def held(name: str) -> None:
            response = requests.post(door.url + "/", data=rpc("SendMessage", message(
                "/sleep 60")), headers={**HEADERS, **CLOSE}, timeout=SETTLE + STOP_WITHIN)
            answers[name] = response.json()["result"]["task"]

        threads = [threading.Thread(target=held, args=(name,)) for name in ("running", "queued")]
        # Each task's first event on the watch says it was accepted (and its request held).
        threads[0].start()
        running = next_submitted(watch, seen)
        threads[1].start()
        queued = next_submitted(watch, seen)
        stream = HttpStream(door.url, "SendStreamingMessage", message("/sleep 60"), EXT)
        assert [stream.next().kind, stream.next().frame_name] == ["task", "connection-ack"]
        assert next_submitted(watch, seen) == stream.events[0].task_id
        idle = requests.Session()              # a keep-alive connection left idle
        assert idle.get(door.card_url, timeout=SETTLE).status_code == 200

        begun = time.monotonic()
        door.proc.terminate()
        door.proc.wait(timeout=gunicorn_conf.graceful_timeout + 5)
        seconds = time.monotonic() - begun
        for thread in threads:
            thread.join(SETTLE)
            assert not thread.is_alive()
        watched, streamed = watch.rest(), stream.rest()
        idle.close()
        print(f"\nSIGTERM to exit with 2 held requests, 2 streams, 1 idle connection: "
              f"{seconds:.2f}s")

    assert door.proc.returncode == 0
    assert seconds < STOP_WITHIN, door.log()
    assert "graceful timeout" not in door.log()
    # Each held request is answered with its own task, as it stood when the door closed.
    assert answers["running"]["id"] == running
    assert answers["running"]["status"]["state"] in ("TASK_STATE_WORKING", "TASK_STATE_CANCELED")
    assert answers["queued"]["id"] == queued
    # The queued task never started: it ended rejected as the session closed.
    assert answers["queued"]["status"]["state"] == "TASK_STATE_REJECTED"
    assert answers["queued"]["status"]["message"]["parts"][0]["text"] == \
        "task rejected: the session ended before this task started"
    assert watched[-1].frame_name == "capsule-closed"
    assert streamed[-1].frame_name == "capsule-closed"
    assert not alive(worker) and not alive(background_pid)
    assert pids_running(command) == []
    assert not (door.home / "running" / f"{door.session_id}.json").exists()


def test_after_task_exit_stops_gunicorn_and_the_session_was_built_in_the_worker(tmp_path):
    manifest = {"name": "once", "version": "0.1.0", "lifecycle": {"after_task": "exit"},
                "agent": "tests.e2e.door.test_shutdown:worker_facts"}
    with start_door(tmp_path, manifest) as door:
        [worker] = children(door.proc.pid)
        answer = requests.post(door.url + "/", data=rpc("SendMessage", message("where?")),
                               headers={**HEADERS, **CLOSE}, timeout=SETTLE).json()
        task = answer["result"]["task"]
        # The task settled before the door closed, so the held request has its end.
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        door.proc.wait(timeout=STOP_WITHIN)
    facts = json.loads(task["artifacts"][0]["parts"][0]["text"])
    # No preload: the app (its agent module, its session's locks) was built in the
    # worker, after gevent patched threading.
    assert facts == {"imported_in": worker, "pid": worker, "ppid": door.proc.pid,
                     "lock": "gevent.thread"}
    assert door.proc.returncode == 0
    assert "after_task: exit" in door.log()
    assert not (door.home / "running" / f"{door.session_id}.json").exists()
