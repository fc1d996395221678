"""What a running agent may call on its task: the interface behind ``TaskContext``.

An application that runs agents (the door's task manager, the hub's run)
implements ``AgentPort`` for one task and hands it to the ``TaskContext`` it
builds; the context calls nothing else. A call the application does not offer
raises ``TaskFailed`` with the reason (the default of the optional calls).
Every call may raise ``TaskCanceled`` once the task was canceled or has ended.
"""
from __future__ import annotations

import logging
from typing import Callable

from murmur_wsgi.agents.endings import TaskFailed
from murmur_wsgi.agents.parts import Message

logger = logging.getLogger(__name__)


class AskInterrupted(Exception):
    """``ask`` gave up waiting: ``interrupt_ask()`` was called (the harness ended)."""


class AgentPort:
    """One task's side of its agent's calls; each method is what a ``TaskContext`` call does.

    Required: ``cancelled``, ``on_cancel``, ``wait``, ``progress``, ``frame``,
    ``artifact``, ``usage``. Optional (refused by default): ``ask``,
    ``delegate``, ``wait_completion``, ``background``; ``record_event`` writes
    nothing by default.
    """

    # --- cancellation -----------------------------------------------------

    def cancelled(self) -> bool:
        """True once the task was canceled (or its run must stop)."""
        raise NotImplementedError

    def on_cancel(self, waker: Callable[[], None]) -> None:
        """Call ``waker()`` once the task is canceled (at once if it is already)."""
        raise NotImplementedError

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds``; True early (and at once) when canceled."""
        raise NotImplementedError

    # --- reporting --------------------------------------------------------

    def progress(self, text: str) -> None:
        """A TASK_STATE_WORKING status carrying ``text``."""
        raise NotImplementedError

    def frame(self, name: str, text: str, fields: dict) -> None:
        """A murmur frame (``text`` is a piece of the streamed answer)."""
        raise NotImplementedError

    def artifact(self, artifact: dict, append: bool, last: bool) -> None:
        """An agent's artifact (ProtoJSON, already owned) or one chunk of it."""
        raise NotImplementedError

    def usage(self, report: tuple) -> None:
        """Add a checked ``RunUsage.check`` report to the run's usage."""
        raise NotImplementedError

    def record_event(self, event_type: str, fields: dict) -> str:
        """Write a record of the task to the application's trace; return its id ("": none)."""
        return ""

    # --- input and background work ------------------------------------------

    def ask(self, question: str) -> Message:
        """Pause for the client's reply (a ``Reply``) to ``question``."""
        raise TaskFailed("this agent asked for input, which this server does not offer")

    def interrupt_ask(self) -> None:
        """Make a waiting (or the next) ``ask`` raise ``AskInterrupted`` (from any thread)."""

    def delegate(self) -> str:
        """Open a delegation the task will wait on; its ``dlg_…`` id."""
        raise TaskFailed("delegations are not available to this agent")

    def wait_completion(self, delegation_id: str, timeout: float | None) -> str | None:
        """A delegation's completion text (None past ``timeout``)."""
        raise TaskFailed("delegations are not available to this agent")

    def background(self, command: str) -> str:
        """Start ``command`` detached; its ``wrk_…`` id."""
        raise TaskFailed("background commands are not available to this agent")
