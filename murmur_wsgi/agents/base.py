"""The agent contract: what an agent receives (``TaskContext``) and how it ends a task.

An agent is a callable ``agent(ctx: TaskContext) -> str | Completed | None``.
A returned ``str`` is the task's answer; ``Completed`` also sets the final
status message; ``None`` completes the task without an answer; any other JSON
value (a dict, a list, a number) is the answer's value (JSON text on the door,
a data part on the hub). Raising ``TaskRejected(reason)`` ends the task
TASK_STATE_REJECTED, and ``TaskFailed(message)`` TASK_STATE_FAILED, with that
status message. Any other exception fails the task too, is logged with its
traceback server-side, and is never sent to the client (``endings.py``). The
agent runs on its own thread (a greenlet under gevent).

``TaskContext`` calls nothing but its ``AgentPort`` (``port.py``), which the
application running the agent implements for the task.
"""
from __future__ import annotations

import itertools
import logging
from typing import Any, Callable

from murmur_wsgi.agents.artifacts import Artifacts
from murmur_wsgi.agents.endings import (AgentValueError, Completed, TaskCanceled,  # noqa: F401
                                        TaskFailed, TaskRejected, check_text)
from murmur_wsgi.agents.parts import Message, Reply
from murmur_wsgi.agents.port import AgentPort
from murmur_wsgi.agents.usage import RunUsage
from murmur_wsgi.settings import MAX_SECS

logger = logging.getLogger(__name__)

Agent = Callable[["TaskContext"], "str | Completed | None"]


_STR_OR_NONE, _BOOL_OR_NONE, _INT_OR_NONE = (str, type(None)), (bool, type(None)), (int, type(None))


def _typed(value, types: tuple, what: str) -> None:
    """Raise ``AgentValueError`` unless ``value`` is one of ``types``: a frame field's type,
    as the frame names it (a bool is no int there, a number no str)."""
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = " or ".join("None" if t is type(None) else t.__name__ for t in types)
        raise AgentValueError(f"{what} is {names}, not {type(value).__name__}")


# A trace record's head, the door's (docs/agents.md, "The session trace").
_TRACE_HEAD = frozenset({"event_type", "event_id", "parent_id", "session_id", "timestamp"})
# The records only the door writes (docs/agents.md's table; harness_* are the harness
# agent's own, written through ctx.record_event).
_DOOR_RECORDS = frozenset({"session_start", "task_start", "task_end", "auth_refused"})

# The frames whose fields are fixed (docs/agents.md; None: any JSON value), for ``frame``.
_FRAME_FIELDS = {
    "text": {"text": (str,), "final": (bool,)},
    "thinking": {"text": (str,), "final": (bool,)},
    "tool-call-started": {"toolCallId": (str,), "toolName": (str,), "input": None},
    "tool-call-progress": {"toolCallId": (str,), "text": (str,)},
    "artifact": {"toolName": (str,), "content": (str,), "fenceSource": _STR_OR_NONE,
                 "toolCallId": _STR_OR_NONE, "isError": _BOOL_OR_NONE,
                 "durationMs": _INT_OR_NONE, "exitCode": _INT_OR_NONE,
                 "truncated": _BOOL_OR_NONE},
    "suggested-prompt": {"text": (str,)},
}


def _bounded(seconds: float, what: str) -> float:
    """``seconds`` at most ``MAX_SECS``: a longer timeout overflows the platform's clocks
    and locks (``OverflowError`` failed a task that waited ``float("inf")``)."""
    if seconds != seconds:
        raise ValueError(f"{what}: seconds is not a number (NaN)")
    return seconds if seconds <= MAX_SECS else MAX_SECS


class TaskContext:
    """What one task gives its agent: its input, and ways to report as it works.

    Attributes:
        message: the message that started the task, typed (``parts.Message``).
        caller: the name of the credential that started the task; None on a
            public door.
        artifacts: the task's named artifacts (``artifacts.Artifacts``).
        task_id: the task's ``tsk_…`` id.
        context_id: the task's ``ctx_…`` (or the caller's) context id.
        text: what the agent reads: the parts joined by newlines, data fenced,
            the referenced-tasks block appended, and for an untrusted task the
            whole wrapped in the untrusted fence.
        images: ``[(media_type, bytes), …]`` in part order.
        data: the values of the message's data parts, in order.
        trust: ``"trusted"`` or ``"untrusted"``.
        owner: the owner the task is recorded under, which keys its harness
            conversation and its retention: the credential that started it; None
            for the caller of a public door and for the operator token (the
            session's own tasks), unlike ``caller``.
        forget_session: the message asked to forget the context's harness
            session (``forgetSession``; only on ``inference.transport: process``).
        conversation: ``"stateless"`` or ``"threaded"``: the door's
            ``lifecycle.conversation``; ``"threaded"`` on the hub.
    """

    def __init__(self, port: AgentPort, *, task_id: str, context_id: str, text: str,
                 images: list[tuple[str, bytes]] = (), data: list[Any] = (),
                 trust: str = "untrusted", owner: str | None = None,
                 conversation: str = "threaded", forget_session: bool = False,
                 message: Message | dict | None = None, caller: str | None = None):
        self._port = port
        self.task_id = task_id
        self.context_id = context_id
        self.text = text
        self.images = list(images)
        self.data = list(data)
        self.trust = trust
        self.owner = owner
        self.forget_session = forget_session
        self.conversation = conversation
        self.caller = caller
        self._message = message        # the ProtoJSON message until first read
        self._artifacts: Artifacts | None = None
        self._calls = itertools.count(1)

    # --- the message ------------------------------------------------------

    @property
    def message(self) -> Message | None:
        """The message that started the task, typed; built on first read."""
        message = self._message
        if isinstance(message, dict):
            message = self._message = Message.from_wire(message)
        return message

    # --- cancellation ----------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """True once the task was canceled; the agent should return soon."""
        return self._port.cancelled()

    def on_cancel(self, waker: Callable[[], None]) -> None:
        """Call ``waker()`` once when the task is canceled or the session closes.

        At once if that happened already. It runs on the thread that cancels,
        holding the door's lock: it must only wake the agent (set an Event, put
        on a queue), never block nor call back into this context.
        """
        self._port.on_cancel(waker)

    def check_cancelled(self) -> None:
        """Raise TaskCanceled when the task was canceled."""
        if self.cancelled:
            raise TaskCanceled(self.task_id)

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds``; return True early (and at once) when canceled.

        ``float("inf")`` (or any wait past ten years, ``MAX_SECS``) waits until the cancel:
        the platform's locks take no longer timeout. A NaN raises ValueError.
        """
        return self._port.wait(_bounded(seconds, "wait"))

    # --- reporting -------------------------------------------------------

    def progress(self, text: str) -> None:
        """Write a TASK_STATE_WORKING status carrying ``text`` (every stream sees it)."""
        if isinstance(text, str):
            check_text(text, "progress")
        self._port.progress(text)

    def write(self, text: str, final: bool = False) -> None:
        """Write a ``text`` frame: a piece of the answer as it streams."""
        _typed(final, (bool,), "write: final")
        self._frame("text", text, {"text": text, "final": final})

    def thinking(self, text: str) -> None:
        """Write a ``thinking`` frame."""
        self._frame("thinking", text, {"text": text, "final": False})

    def tool_call_started(self, tool_name: str, input: Any = None,
                          tool_call_id: str | None = None) -> str:
        """Write a ``tool-call-started`` frame; return the call's id."""
        _typed(tool_name, (str,), "tool_call_started: tool_name")
        _typed(tool_call_id, (str, type(None)), "tool_call_started: tool_call_id")
        call_id = tool_call_id or f"call_{next(self._calls)}"
        self._frame("tool-call-started", f"tool call started: {tool_name}",
                    {"toolCallId": call_id, "toolName": tool_name, "input": input})
        return call_id

    def tool_call_progress(self, tool_call_id: str, text: str) -> None:
        """Write a ``tool-call-progress`` frame."""
        _typed(tool_call_id, (str,), "tool_call_progress: tool_call_id")
        self._frame("tool-call-progress", text, {"toolCallId": tool_call_id, "text": text})

    def artifact(self, tool_name: str, content: str, *, fence_source: str | None = None,
                 tool_call_id: str | None = None, is_error: bool | None = None,
                 duration_ms: int | None = None, exit_code: int | None = None,
                 truncated: bool | None = None) -> None:
        """Write an ``artifact`` frame: what a tool returned (every key present)."""
        for value, types, what in ((tool_name, (str,), "tool_name"),
                                   (fence_source, _STR_OR_NONE, "fence_source"),
                                   (tool_call_id, _STR_OR_NONE, "tool_call_id"),
                                   (is_error, _BOOL_OR_NONE, "is_error"),
                                   (duration_ms, _INT_OR_NONE, "duration_ms"),
                                   (exit_code, _INT_OR_NONE, "exit_code"),
                                   (truncated, _BOOL_OR_NONE, "truncated")):
            _typed(value, types, f"artifact: {what}")
        self._frame("artifact", content, {
            "toolName": tool_name, "content": content, "fenceSource": fence_source,
            "toolCallId": tool_call_id, "isError": is_error, "durationMs": duration_ms,
            "exitCode": exit_code, "truncated": truncated})

    @property
    def artifacts(self) -> Artifacts:
        """The task's named artifacts: ``add(name, parts)`` and ``stream(name)``."""
        if self._artifacts is None:
            self._artifacts = Artifacts(self._port.artifact)
        return self._artifacts

    def close_artifacts(self) -> None:
        """End every artifact stream still open; ``run_agent`` calls it as the agent returns."""
        if self._artifacts is not None:
            for out in self._artifacts.open_streams():
                out.close()

    def usage(self, input_tokens: int = 0, output_tokens: int = 0, cached_tokens: int = 0,
              model: str | None = None) -> None:
        """Report tokens this run consumed; reports add up, per model, on the task record.

        The door writes none of it on the wire (``TaskRecord.usage``).

        Raises:
            ValueError: a count is not a non-negative integer, or ``model`` not a str.
        """
        report = RunUsage.check(input_tokens, output_tokens, cached_tokens, model)
        self._port.usage(report)

    def frame(self, name: str, text: str, fields: dict) -> None:
        """Write any murmur frame (``quota``, ``suggested-prompt`` from a harness).

        A frame whose fields are fixed is held to them as the call that writes it
        is (``write``, ``tool_call_started``, ``artifact``, …): its keys, each of its type.
        """
        typed = _FRAME_FIELDS.get(name)
        if typed is not None:
            if not isinstance(fields, dict) or fields.keys() != typed.keys():
                raise AgentValueError(f"frame '{name}': fields are {sorted(typed)}")
            for key, types in typed.items():
                if types is not None:
                    _typed(fields[key], types, f"frame '{name}': {key}")
        self._frame(name, text, fields)

    def _frame(self, name: str, text: str, fields: dict) -> None:
        self.check_cancelled()
        if isinstance(text, str):
            check_text(text, f"frame '{name}'")
        self._port.frame(name, text, fields)

    def record_event(self, event_type: str, /, **fields) -> str:
        """Write a record to the session trace under this task's ``task_start``.

        Its head (``event_type``, ``event_id``, ``parent_id``, ``session_id``,
        ``timestamp``) is the door's: a field of one of those names is refused, as a type
        other than ``str`` for ``event_type`` (traced or not, the same answer).
        """
        _typed(event_type, (str,), "record_event: event_type")
        if event_type in _DOOR_RECORDS:
            raise AgentValueError(f"record_event: '{event_type}' is a record only the door "
                                  "writes")
        if not _TRACE_HEAD.isdisjoint(fields):
            raise AgentValueError(f"record_event: '{min(_TRACE_HEAD.intersection(fields))}' "
                                  "is the record's own (its head), not a field")
        return self._port.record_event(event_type, fields)

    # --- input and background work ---------------------------------------

    def ask(self, question: str) -> Reply:
        """Pause in TASK_STATE_INPUT_REQUIRED with ``question``; return the client's reply.

        The reply is its ``Message`` (``message_id``, ``parts``, ``metadata`` …) with
        ``.text``, the reply as the agent reads it (rendered like ``ctx.text``).

        Raises:
            AgentValueError: ``question`` is not a str (the prompt artifact's text part),
                or not valid text; refused before the task pauses.
        """
        if not isinstance(question, str):
            raise AgentValueError(f"ask: the question is a str, not {type(question).__name__}")
        check_text(question, "ask")
        return self._port.ask(question)

    def interrupt_ask(self) -> None:
        """Wake ``ask`` with ``AskInterrupted``: what would answer it is gone (any thread)."""
        self._port.interrupt_ask()

    def delegate(self) -> str:
        """Open a delegation this task will wait on; return its ``dlg_…`` id.

        Hand the id to the sub-capsule: its completion, a SendMessage carrying
        ``x-murmur-task-origin: completion``, ``x-murmur-completion-session: <this
        session>`` and ``x-murmur-delegation-id: <id>``, is delivered here.
        """
        return self._port.delegate()

    def wait_completion(self, delegation_id: str, timeout: float | None = None) -> str | None:
        """Wait for a delegation's completion; return its text (None past ``timeout``).

        ``timeout`` is bounded as ``wait``'s ``seconds`` is; None waits without one.
        """
        if timeout is not None:
            timeout = _bounded(timeout, "wait_completion")
        return self._port.wait_completion(delegation_id, timeout)

    def background(self, command: str) -> str:
        """Start ``command`` detached (its binary must be allowed); return its ``wrk_…``."""
        self.check_cancelled()
        return self._port.background(command)
