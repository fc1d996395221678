"""Nothing outlives its session: a worker that misses gunicorn's timeout takes its processes.

The door's agent (``tests.e2e.door.test_worker_timeout:stall``) starts a background
command, then loops without ever yielding to the gevent hub, as a blocking
call would: the worker's heartbeat stops, gunicorn's master logs ``WORKER
TIMEOUT`` and sends SIGABRT, and the conf's ``worker_abort`` ends the process
groups the worker started before it exits. ``timeout`` is 2 s here.
"""
from __future__ import annotations

import json
import os
import sys
import time

import pytest

from tests.e2e.conftest import CLOSE, http_post, session_id_of, start_door, wait_for_card
from tests.e2e.door.test_shutdown import alive, background, children, pids_running
from tests.e2e.door.test_worker_killed import exits_within

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

BACKGROUND_SECS = 875                       # sleep 875.<master pid>: this door's own
TIMEOUT_SECS = 2
DEADLINE = 10.0
SPIN_SECS = 30.0                            # the worker is aborted long before


def stall(ctx):
    """The agent: a background command, then a loop that never yields (the hub stalls)."""
    ctx.background(" ".join(background(os.getppid(), BACKGROUND_SECS)))    # the master's pid
    ends = time.monotonic() + SPIN_SECS
    while time.monotonic() < ends:
        pass
    return "the worker was not aborted"


def test_a_worker_timeout_leaves_no_process_of_its_session(tmp_path):
    manifest = {"name": "stalled-worker", "version": "0.1.0",
                "agent": "tests.e2e.door.test_worker_timeout:stall",
                "capabilities": {"shell": {"allow": ["sleep"]}}}
    with start_door(tmp_path, manifest,
                    env={"GUNICORN_CMD_ARGS": f"--timeout {TIMEOUT_SECS}"}) as door:
        (worker,) = children(door.proc.pid)
        answer = http_post(door.url + "/", json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "go"}]},
                "configuration": {"returnImmediately": True}}}),
            {**CLOSE, "Content-Type": "application/json", "A2A-Version": "1.0"})
        assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        command = background(door.proc.pid, BACKGROUND_SECS)
        deadline = time.monotonic() + DEADLINE
        while not pids_running(command):
            assert time.monotonic() < deadline, f"the background command never ran\n{door.log()}"
        (background_pid,) = pids_running(command)

        assert exits_within(worker, DEADLINE), f"the stalled worker was not aborted\n{door.log()}"
        assert exits_within(background_pid, 2.0), \
            f"the background command outlived its worker\n{door.log()}"
        assert not alive(background_pid) and pids_running(command) == []
        log = door.log()
        assert f"WORKER TIMEOUT (pid:{worker})" in log
        assert "murmur-wsgi: worker timeout: killed the process groups" in log      # the hook
        # The master started a new worker, a new session.
        card = wait_for_card(door, time.monotonic() + DEADLINE)
        assert session_id_of(card) not in (None, door.session_id)
