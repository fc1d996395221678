"""What a hub run gives its agent: ``HubContext``, the door's TaskContext contract for A2A.

A hosted agent is the same callable as the door's (``demo``, a Python
callable, a process harness). On the hub ``ctx.origin == "a2a"`` on every run:
the caller is a remote agent, never the person, so a hosted agent must never
take its "yes" as a person's confirmation. The hub never asks for input
(no INPUT_REQUIRED): ``ctx.ask`` fails the run. Frames other than the
answer's text (thinking, tool calls, tool artifacts) are not forwarded.
"""
from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Any

from murmur_wsgi.agents.base import TaskCanceled, TaskFailed

logger = logging.getLogger(__name__)

ORIGIN = "a2a"


@dataclass(frozen=True, slots=True)
class Caller:
    """Who called: the tenant the credential gave, and the JWT's subject (or "api-key")."""

    tenant: str
    subject: str
    agent: str


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier turn of the context: ``role`` is "user" or "agent"."""

    role: str
    text: str


class HubContext:
    """One run's view for its agent (``run`` is its ``runs.Run``).

    Attributes:
        task_id, context_id: the task's ids.
        text: the message's text parts joined by newlines, data parts fenced.
        data: the values of its data parts, in order.
        message: the message as sent (A2A JSON).
        caller: a ``Caller``.
        history: the context's earlier turns, oldest first (``Turn``s).
        origin: always ``"a2a"``.
    """

    trust = "untrusted"
    conversation = "threaded"
    forget_session = False
    session_key = None
    images: list = []

    def __init__(self, run, text: str, data: list, message: dict, caller: Caller,
                 history: list):
        self._run = run
        self.task_id = run.task_id
        self.context_id = run.context_id
        self.text = text
        self.data = data
        self.message = message
        self.caller = caller
        self.history = history
        self.origin = ORIGIN
        # NOTE: what the harness keys its sessions by, with the context id.
        self.owner = caller.tenant
        self._calls = itertools.count(1)

    # --- cancellation ----------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """True once the run was canceled, timed out or interrupted: return soon."""
        return self._run.stopping

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise TaskCanceled(self.task_id)

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds``; True early (and at once) once the run must stop."""
        return self._run.wait_stop(seconds)

    # --- reporting -------------------------------------------------------

    def write(self, text: str, final: bool = False) -> None:
        """Stream a piece of the answer (an artifactUpdate on the answer artifact)."""
        self.check_cancelled()
        self._run.token(text)

    def progress(self, text: str) -> None:
        """A TASK_STATE_WORKING status carrying ``text``."""
        self.check_cancelled()
        self._run.progress(text)

    def usage(self, input_tokens: int = 0, output_tokens: int = 0, cached_tokens: int = 0,
              model: str | None = None) -> None:
        """Add what the run consumed (the usage part and its credits come from it)."""
        self._run.usage.add(input_tokens, output_tokens, cached_tokens, model)

    def thinking(self, text: str) -> None:
        self.check_cancelled()

    def tool_call_started(self, tool_name: str, input: Any = None,
                          tool_call_id: str | None = None) -> str:
        self.check_cancelled()
        return tool_call_id or f"call_{next(self._calls)}"

    def tool_call_progress(self, tool_call_id: str, text: str) -> None:
        self.check_cancelled()

    def artifact(self, tool_name: str, content: str, **fields) -> None:
        self.check_cancelled()

    def frame(self, name: str, text: str, fields: dict) -> None:
        self.check_cancelled()

    def record_event(self, event_type: str, **fields) -> str:
        logger.info("task %s: %s", self.task_id, event_type)
        return ""

    # --- what the hub does not do ----------------------------------------

    def ask(self, question: str) -> str:
        raise TaskFailed("this agent asked for input, and a task on the hub never waits for "
                         "input")

    def delegate(self) -> str:
        raise TaskFailed("delegations are not available to an agent on the hub")

    def wait_completion(self, delegation_id: str, timeout: float | None = None) -> str | None:
        raise TaskFailed("delegations are not available to an agent on the hub")

    def background(self, command: str) -> str:
        raise TaskFailed("background commands are not available to an agent on the hub")
