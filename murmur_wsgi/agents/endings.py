"""How an agent ends its task, and the one ladder from its ending to the task's final state.

An agent returns (a ``str``, ``Completed``, a JSON value, or None) or raises
(``TaskRejected``, ``TaskFailed``, ``TaskCanceled``, anything else). ``run_agent``
calls it and reads that ending into an ``Ending``: the final state, the status
message the agent gave, the answer (its text, or its JSON value). Each
application renders an ``Ending`` its own way (the door's ``response`` text,
the hub's answer artifact) and applies its own defaults for a message the
agent left empty.

A value the agent hands over that is not JSON (NaN or infinity, a set, bytes,
an object, a string with a lone surrogate) is refused in the call that carries
it with ``AgentValueError``; uncaught, or returned, it ends the task FAILED
with ``NOT_JSON``, the detail logged server-side, never sent.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from murmur_wsgi.wire.depth import MAX_VALUE_DEPTH, nests_deeper
from murmur_wsgi.wire.doubles import digit_run, wide_integer
from murmur_wsgi.wire.task import CANCELED, COMPLETED, FAILED, REJECTED

logger = logging.getLogger(__name__)

NOT_JSON = "the agent's answer is not valid JSON"

_strict_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False,
                                 allow_nan=False).encode


@dataclass(frozen=True, slots=True)
class Completed:
    """Return from an agent to complete its task: ``text`` is the ``response`` artifact.

    ``text=None`` writes no ``response``; ``status_message`` is the final status's
    message (``task completed`` when None).
    """

    text: str | None = None
    status_message: str | None = None


class TaskRejected(Exception):
    """Raise from an agent to end its task TASK_STATE_REJECTED with ``reason``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class TaskFailed(Exception):
    """Raise from an agent to end its task TASK_STATE_FAILED with ``message``."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class TaskCanceled(Exception):
    """Raised inside the agent by TaskContext calls once the task is canceled."""


class AgentValueError(TypeError, ValueError):
    """A value the agent handed over is not JSON; ``str()`` says which and why.

    A TypeError and a ValueError both, so an agent catching either one keeps working.
    """


def check_text(text: str, what: str) -> str:
    """``text`` if it can be written as UTF-8 JSON text (no lone surrogate).

    Raises:
        AgentValueError: it holds a lone surrogate.
    """
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as ex:
            raise AgentValueError(f"{what}: not valid text: {ex.reason} at {ex.start}") from None
    return text


def json_text(value, what: str) -> str:
    """``value`` as compact JSON text (UTF-8, no NaN or infinity, string keys).

    Raises:
        AgentValueError: ``value`` is not JSON: ``<what>: not a JSON value: …``.
    """
    try:
        return check_text(_strict_dumps(value), what)
    except AgentValueError as ex:
        raise AgentValueError(f"{what}: not a JSON value: {ex}") from None
    except (TypeError, ValueError, RecursionError) as ex:
        raise AgentValueError(f"{what}: not a JSON value: {ex}") from None


def check_readable(value, what: str, max_depth: int = MAX_VALUE_DEPTH) -> None:
    """Raise ``AgentValueError`` when a JSON ``value`` is one the hub's clients cannot read
    back: an integer no double holds, or objects and arrays nested past ``max_depth``.

    Its readers read every number as a double (protobuf's Struct, JavaScript), and
    a2a-sdk's through protobuf's JSON parser, which stops at 100 levels (wire/doubles.py,
    wire/depth.py). PERF: the value's JSON text is looked at first, in C; only one
    holding a long run of digits is walked for them.
    """
    if digit_run(_strict_dumps(value).encode("utf-8", "surrogatepass")) and wide_integer(value):
        raise AgentValueError(f"{what}: an integer overflows a double")
    if nests_deeper(value, max_depth):
        raise AgentValueError(f"{what}: nests deeper than {max_depth} levels of objects and "
                              "arrays")


@dataclass(frozen=True, slots=True)
class Ending:
    """How a run ended, read by ``run_agent``.

    Attributes:
        state: the task's final state (``wire.task``'s COMPLETED, CANCELED, REJECTED, FAILED).
        message: the status message the agent gave (None or "": the application's default).
        text: the answer's text (COMPLETED; None when the agent returned none).
        data: the answer's JSON value when the agent returned one that is not a str.
        error: the exception that failed the run (logged by the application, never sent);
            with ``message == NOT_JSON`` the agent's value was not JSON.
        stopped: a BaseException ended the agent (SystemExit, a killed greenlet): the
            application ends the task, then raises ``error`` again.
    """

    state: str
    message: str | None = None
    text: str | None = None
    data: Any = None
    error: BaseException | None = None
    stopped: bool = False

    @property
    def bad_value(self) -> bool:
        """The agent's value was not JSON (the task ends FAILED with NOT_JSON)."""
        return self.message == NOT_JSON and self.error is not None

    def answer_text(self) -> str | None:
        """The answer as one text: its text, or its JSON value as JSON text (the door's)."""
        if self.text is not None or self.data is None:
            return self.text
        return _strict_dumps(self.data)


def run_agent(agent, ctx) -> Ending:
    """Call ``agent(ctx)`` and read its ending; every open artifact stream is closed after.

    Never raises: a BaseException comes back as ``stopped`` (see ``Ending``). What the
    agent handed over is its own code too (a str subclass, an object posing as one, a
    dict whose ``items`` raises): reading it may raise anything, which fails the task
    as the agent's own exception would, rather than leave it running with no agent.
    """
    try:
        return _ending(agent, ctx)
    except Exception as ex:  # noqa: BLE001 - reading the agent's value failed: its bug
        return Ending(FAILED, error=ex)
    except BaseException as ex:
        return Ending(FAILED, error=ex, stopped=True)


def _ending(agent, ctx) -> Ending:
    """``run_agent``'s ladder: the agent's call, then what it returned or raised, read."""
    try:
        result = agent(ctx)
    except TaskCanceled:
        return Ending(CANCELED)
    except TaskRejected as ex:
        return _said(REJECTED, ex.reason, ex)
    except TaskFailed as ex:
        return _said(FAILED, ex.message, ex)
    except AgentValueError as ex:
        return Ending(FAILED, NOT_JSON, error=ex)
    except Exception as ex:  # noqa: BLE001 - an agent's bug fails its task, never the server
        return Ending(FAILED, error=ex)
    except BaseException as ex:
        return Ending(FAILED, error=ex, stopped=True)
    try:
        ctx.close_artifacts()                   # a stream the agent left open gets its end
    except TaskCanceled:
        pass                                    # it ended meanwhile: its end stands
    try:
        return returned(result)
    except AgentValueError as ex:
        return Ending(FAILED, NOT_JSON, error=ex)


def _said(state: str, message, ex: Exception) -> Ending:
    if message is not None and (not isinstance(message, str) or not _is_text(message)):
        return Ending(FAILED, NOT_JSON, error=AgentValueError(
            f"the {type(ex).__name__} message is not valid text"))
    return Ending(state, message)


def _is_text(text: str) -> bool:
    try:
        check_text(text, "")
    except AgentValueError:
        return False
    return True


def returned(result) -> Ending:
    """The COMPLETED ending of what an agent returned.

    A ``str`` is the answer's text; ``Completed(text, status_message)`` also sets the
    status message; None answers nothing; any other value is the answer's JSON value.

    Raises:
        AgentValueError: a text is not valid text, or the value is not JSON.
    """
    if type(result) is Completed:
        text, message = result.text, result.status_message
        if message is not None:
            check_text(_as_str(message, "the status message"), "the status message")
        if text is None or isinstance(text, str):
            return Ending(COMPLETED, message, text=None if text is None
                          else check_text(text, "the answer"))
        return Ending(COMPLETED, message, data=_json_value(text))
    if result is None:
        return Ending(COMPLETED)
    if isinstance(result, str):
        return Ending(COMPLETED, text=check_text(result, "the answer"))
    return Ending(COMPLETED, data=_json_value(result))


def _as_str(value, what: str) -> str:
    if not isinstance(value, str):
        raise AgentValueError(f"{what} is a str, not {type(value).__name__}")
    return value


def _json_value(value):
    """A copy of an answer's JSON value, which nothing the agent holds can change."""
    return json.loads(json_text(value, "the answer"))
