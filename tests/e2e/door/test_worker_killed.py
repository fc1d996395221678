"""Nothing outlives its session: SIGKILL a real gunicorn worker, its processes end too.

The door's agent (``tests.e2e.door.test_worker_killed:both``) starts a background
command and then serves the task with a process harness that starts a child
in its group and waits. SIGKILL of the worker leaves the door no chance to end
them: the parent-death signal ends the two it started, and the master's
``child_exit`` ends the harness's group, child included.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from murmur_wsgi.agents.harness import HarnessAgent
from murmur_wsgi.uris import STREAM_URI
from tests.e2e.conftest import start_door, wait_for_card
from tests.e2e.door.test_shutdown import HttpStream, alive, background, children, message, pids_running
from tests.process_util import exits_within

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

REPO = Path(__file__).resolve().parents[3]
BACKGROUND_SECS = 876
DEADLINE = 10.0
_HARNESS = HarnessAgent({"process": [sys.executable, str(REPO / "tests" / "harness_faults.py"),
                                     "grandchild"], "idle_timeout_secs": 60,
                         "cancel_grace_secs": 0.3})


def both(ctx):
    """The agent: a background command, then a harness whose child waits in its group."""
    ctx.background(" ".join(background(os.getppid(), BACKGROUND_SECS)))    # the master's pid
    return _HARNESS(ctx)


def test_sigkill_of_the_worker_leaves_no_process_of_its_session(tmp_path):
    manifest = {"name": "killed-worker", "version": "0.1.0",
                "agent": "tests.e2e.door.test_worker_killed:both",
                "capabilities": {"shell": {"allow": ["sleep"]}}}
    with start_door(tmp_path, manifest) as door:
        (worker,) = children(door.proc.pid)
        stream = HttpStream(door.url, "SendStreamingMessage", message("go"),
                            {"A2A-Extensions": STREAM_URI})
        while True:                          # until the harness says which child it started
            event = stream.next()
            assert event is not None, "the stream ended before the harness started its child"
            if event.frame_name == "thinking":
                child = int(event.frame["text"].split()[1])
                break
        stream.response.close()
        harness = os.getpgid(child)              # the harness leads the child's group
        command = background(door.proc.pid, BACKGROUND_SECS)
        (background_pid,) = pids_running(command)
        session = [harness, child, background_pid]
        assert all(alive(pid) for pid in session)
        groups = door.home / "groups" / str(door.proc.pid)
        assert sorted(os.listdir(groups)) == sorted(f"{worker}-{pid}"
                                                    for pid in (harness, background_pid))

        os.kill(worker, signal.SIGKILL)
        deadline = time.monotonic() + DEADLINE
        for pid in session:
            assert exits_within(pid, max(0.0, deadline - time.monotonic())), \
                f"process {pid} of the killed worker's session still runs\n{door.log()}"
            assert not alive(pid)
        assert pids_running(command) == []
        # The master started a new worker, a new session; stop the door once it serves.
        wait_for_card(door, time.monotonic() + DEADLINE)
