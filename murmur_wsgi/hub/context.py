"""What a hub run gives its agent: the agents' ``TaskContext``, over the run's port.

A hosted agent is the same callable as the door's (``demo``, a Python
callable, a process harness), and gets the same ``TaskContext`` API; each
call goes to ``RunPort``, which hands it to the run. On the hub
``ctx.origin == "a2a"`` on every run: the caller is a remote agent, never the
person, so a hosted agent must never take its "yes" as a person's
confirmation. ``ctx.history`` holds the context's earlier turns, and
``ctx.conversation`` is ``"threaded"``. The hub never asks for input (no
INPUT_REQUIRED): ``ctx.ask`` fails the run, as do delegations and background
commands. Frames other than the answer's text (thinking, tool calls, tool
artifacts) are not forwarded; ``ctx.record_event`` writes to the hub's log.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from murmur_wsgi.agents.base import TaskContext
from murmur_wsgi.agents.endings import AgentValueError, TaskFailed, check_readable
from murmur_wsgi.agents.port import AgentPort
from murmur_wsgi.wire.depth import MAX_VALUE_DEPTH

logger = logging.getLogger(__name__)

ORIGIN = "a2a"
NO_INPUT = "this agent asked for input, and a task on the hub never waits for input"
NO_DELEGATIONS = "delegations are not available to an agent on the hub"
# The most tokens a run's usage may count, each count over its reports: every JSON reader
# reads it exactly (2**53 - 1), and the run's price stays within the pricing's decimal
# arithmetic.
MAX_TOKENS = 2 ** 53 - 1


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


class RunPort(AgentPort):
    """One run's side of its agent's calls: each goes to the run (``runs.Run``)."""

    def __init__(self, run):
        self.run = run

    def cancelled(self) -> bool:
        return self.run.stopping

    def on_cancel(self, waker) -> None:
        self.run.on_stop(waker)

    def wait(self, seconds: float) -> bool:
        return self.run.wait_stop(seconds)

    def progress(self, text: str) -> None:
        if not isinstance(text, str):
            raise AgentValueError(f"progress: the text is a str, not {type(text).__name__}")
        self.run.progress(text)

    def frame(self, name: str, text: str, fields: dict) -> None:
        if name == "text":
            self.run.token(text)
        # NOTE: thinking, tool calls and tool artifacts are not forwarded (the text).

    def artifact(self, artifact: dict, append: bool, last: bool) -> None:
        # NOTE: a data part's value sits 3 levels in (the artifact, its parts, the part).
        check_readable(artifact, f"artifact '{artifact['artifactId']}'", MAX_VALUE_DEPTH + 3)
        self.run.publish_artifact(artifact, append, last)

    def usage(self, report: tuple) -> None:
        self.run.add_usage(report, MAX_TOKENS)

    def record_event(self, event_type: str, fields: dict) -> str:
        logger.info("task %s: %s", self.run.task_id, event_type)
        return ""

    def ask(self, question: str):
        raise TaskFailed(NO_INPUT)

    def delegate(self) -> str:
        raise TaskFailed(NO_DELEGATIONS)

    def wait_completion(self, delegation_id: str, timeout: float | None) -> str | None:
        raise TaskFailed(NO_DELEGATIONS)

    def background(self, command: str) -> str:
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
        # NOTE: the owner (what a harness keys its sessions by, with the context) is the
        # tenant; every caller of the hub is untrusted.
        super().__init__(RunPort(run), task_id=run.task_id, context_id=run.context_id,
                         text=text, data=data, trust="untrusted", owner=caller.tenant,
                         conversation="threaded", message=message, caller=caller.tenant)
        self.identity = caller
        self.history = history
        self.origin = ORIGIN
