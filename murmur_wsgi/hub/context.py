"""What a hub run gives its agent: the door's ``TaskContext``, with a run behind it.

A hosted agent is the same callable as the door's (``demo``, a Python
callable, a process harness), and gets the same ``TaskContext`` API: the
door's task manager is replaced by ``_RunPort``, which hands each call to the
run. On the hub ``ctx.origin == "a2a"`` on every run: the caller is a remote
agent, never the person, so a hosted agent must never take its "yes" as a
person's confirmation. ``ctx.history`` holds the context's earlier turns.
The hub never asks for input (no INPUT_REQUIRED): ``ctx.ask`` fails the run,
as do delegations and background commands. Frames other than the answer's
text (thinking, tool calls, tool artifacts) are not forwarded.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from murmur_wsgi.agents.base import TaskContext, TaskFailed

logger = logging.getLogger(__name__)

ORIGIN = "a2a"
NO_INPUT = "this agent asked for input, and a task on the hub never waits for input"


@dataclass(frozen=True, slots=True)
class Caller:
    """Who called: the tenant the credential gave, the JWT's subject (or "api-key"), the agent."""

    tenant: str
    subject: str
    agent: str


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier turn of the context: ``role`` is "user" or "agent"."""

    role: str
    text: str


@dataclass(frozen=True, slots=True)
class _RunRecord:
    """The record fields TaskContext reads."""

    id: str
    context_id: str
    owner: str                       # what the harness keys its sessions by, with the context
    trust: str = "untrusted"


class _Unavailable:
    """The session parts the hub does not have: delegations."""

    def expect(self, record):
        raise TaskFailed("delegations are not available to an agent on the hub")

    def wait(self, record, delegation_id, timeout):
        raise TaskFailed("delegations are not available to an agent on the hub")


class _Trace:
    def task_event(self, task_id: str, event_type: str, **fields) -> str:
        logger.info("task %s: %s", task_id, event_type)
        return ""


class _Session:
    class manifest:                                    # noqa: N801 - what TaskContext reads
        lifecycle = {"conversation": "threaded"}

    trace = _Trace()
    delegations = _Unavailable()


class _RunPort:
    """Stands for the door's TaskManager: every call TaskContext makes goes to the run."""

    session = _Session()

    def __init__(self, run):
        self.run = run

    def is_cancelled(self, record) -> bool:
        return self.run.stopping

    def on_cancel(self, record, waker) -> None:
        self.run.on_stop(waker)

    def wait_cancelled(self, record, seconds: float) -> bool:
        return self.run.wait_stop(seconds)

    def progress(self, record, text: str) -> None:
        self.run.progress(text)

    def frame(self, record, name: str, text: str, fields: dict) -> None:
        if name == "text":
            self.run.token(text)
        # NOTE: thinking, tool calls and tool artifacts are not forwarded (the text).

    def publish_artifact(self, record, artifact: dict, append: bool, last: bool) -> None:
        self.run.publish_artifact(artifact, append, last)

    def record_usage(self, record, report: tuple) -> None:
        self.run.add_usage(report)

    def ask(self, record, question: str) -> str:
        raise TaskFailed(NO_INPUT)

    def background(self, record, command: str) -> str:
        raise TaskFailed("background commands are not available to an agent on the hub")


class HubContext(TaskContext):
    """One run's view for its agent (``run`` is its ``runs.Run``).

    Attributes (beside TaskContext's):
        caller: the tenant the credential gave (a str, as the door's credential name).
        identity: a ``Caller``: the tenant, the JWT's subject (or "api-key"), the agent.
        history: the context's earlier turns, oldest first (``Turn``s).
        origin: always ``"a2a"``.
    """

    def __init__(self, run, text: str, data: list, message: dict, caller: Caller,
                 history: list):
        record = _RunRecord(run.task_id, run.context_id, caller.tenant)
        super().__init__(_RunPort(run), record, text, [], data, message=message,
                         caller=caller.tenant)
        self.identity = caller
        self.history = history
        self.origin = ORIGIN
