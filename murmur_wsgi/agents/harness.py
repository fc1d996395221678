"""The process harness (``agent: {process: [...]}``): a program that speaks JSON lines.

One process per task, in its own process group. The door writes a ``task``
line (and a ``reply`` line for each ``ask``) to its stdin; the harness
writes its frames and then ``response``, ``complete``, ``reject`` or ``fail``
to its stdout (the agent API's lines are in ``harness_lines.py``, the streamed ones
in ``harness_stream_lines.py``). Every
way a harness can misbehave fails the task with a one-line status message
and kills its process group; see ``docs/harness.md`` for the protocol.

Concurrency:
    ``HarnessAgent`` is shared by the session's tasks. ``_cond`` (a
    ``Condition``) guards ``_sessions`` ((owner, sha256 of the contextId) ->
    harness session id: a context id names a conversation of its owner only;
    its digest, not the client's id, is kept, so a long id costs 32 bytes),
    ``_live`` (pid -> HarnessProcess), ``_starting`` and ``_exits``; it is
    notified when a process is registered or reaped. Each task's process is
    driven from the task's own thread, which waits on the process's events
    alone (a line, the end of stdout, the exit), up to the idle deadline: a
    cancel or the session closing (``ctx.on_cancel``) and a stderr flood
    wake it with an event of their own, so nothing is polled.

    Ending a process never holds up its task: once the task's outcome is
    known, a short-lived reaper thread (``_reap``) ends the process group
    (close stdin, up to ``cancel_grace_secs``, then always SIGKILL) while the
    task's thread returns. A canceled task has ended already: its thread
    ends the group itself (SIGTERM, the grace, SIGKILL) before it returns, so
    the capsule's slot stays taken until the harness is gone. A process stays in ``_live``
    until it is reaped, so ``close()`` also ends the ones being reaped.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import signal
import threading
import time
import weakref
from collections import OrderedDict

from murmur_wsgi import logs
from murmur_wsgi.agents import harness_lines, harness_stream_lines
from murmur_wsgi.agents.base import Completed, TaskCanceled, TaskContext, TaskFailed, TaskRejected
from murmur_wsgi.agents.endings import check_text
from murmur_wsgi.agents.harness_lines import HarnessFault
from murmur_wsgi.agents.harness_lines import field as _field
from murmur_wsgi.agents.port import AskInterrupted
from murmur_wsgi.agents.process import REAP_SECS, HarnessProcess, exit_text
from murmur_wsgi.wire.encode import utf8_bytes
from murmur_wsgi.wire.json_counts import too_deep

logger = logging.getLogger(__name__)

STDERR_LIMIT = 1024 ** 2      # bytes of stderr a task's harness may write ("max_stderr_bytes")
MAX_SESSIONS = 10_000         # contexts whose harness session is remembered, newest kept
SESSION_ID_BYTES = 1024       # a harness session id's longest ("max_session_id_bytes")
LINE_DEPTH = 64               # a line's deepest nesting of objects and arrays ("max_line_depth")


def _key(owner: str | None, context_id: str) -> tuple:
    """``_sessions``' key: the owner and the context id's digest (ids are unbounded)."""
    return owner, hashlib.sha256(context_id.encode("utf-8", "surrogatepass")).digest()
EXITS_KEPT = 64
EXIT_DRAIN_SECS = 1.0         # after the harness exited, the longest wait for a line it left


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")        # NaN, Infinity: Python's, not JSON's


class HarnessDeclined(TaskFailed):
    """The harness wrote ``fail``: the task fails with its message."""


class HarnessAgent:
    """Serve each task with a fresh harness process (``agent: {process: [...]}``).

    Args:
        spec: the manifest's ``agent`` block: ``process`` (argv), and
            optionally ``idle_timeout_secs`` (600), ``cancel_grace_secs`` (10),
            ``max_line_bytes`` (1 MiB), ``max_line_depth`` (64), ``max_stderr_bytes``
            (1 MiB) and ``max_session_id_bytes`` (1 KiB: the ids remembered, ``MAX_SESSIONS`` at
            most, hold at most their product).
    """

    def __init__(self, spec: dict):
        self.argv = list(spec["process"])
        if not self.argv:
            raise ValueError("process: needs a command")
        self.idle_timeout = float(spec.get("idle_timeout_secs", 600.0))
        self.cancel_grace = float(spec.get("cancel_grace_secs", 10.0))
        self.max_line_bytes = int(spec.get("max_line_bytes", 1024 ** 2))
        self.max_line_depth = int(spec.get("max_line_depth", LINE_DEPTH))
        self.stderr_limit = int(spec.get("max_stderr_bytes", STDERR_LIMIT))
        self.max_session_id_bytes = int(spec.get("max_session_id_bytes", SESSION_ID_BYTES))
        self._cond = threading.Condition()
        self._sessions: OrderedDict[tuple, str] = OrderedDict()  # guarded by _cond
        self._live: dict[int, HarnessProcess] = {}               # guarded by _cond
        self._starting = 0                                       # guarded by _cond
        self._exits: OrderedDict[int, int | None] = OrderedDict()  # guarded by _cond
        _AGENTS.add(self)

    # --- the harness session of a context ----------------------------------

    def harness_session(self, context_id: str, owner: str | None = None) -> str | None:
        """The harness session id ``owner``'s context names, or None.

        ``owner``: the credential that started the context's tasks (None: a public
        door's caller, or the operator). Another owner's same context id is another
        conversation: it never resumes this one.
        """
        with self._cond:
            return self._sessions.get(_key(owner, context_id))

    def _start_session(self, ctx: TaskContext) -> tuple[str, str | None]:
        """Apply forgetSession, then choose ``("new", None)`` or ``("resume", id)``."""
        key = _key(ctx.owner, ctx.context_id)
        with self._cond:
            dropped = self._sessions.pop(key, None) if ctx.forget_session else None
            current = self._sessions.get(key)
        if dropped is not None:
            ctx.record_event("harness_session_forgotten", context_id=ctx.context_id,
                             harness_session_id=dropped, requested_by="a2a")
        if current is not None and ctx.conversation == "threaded":
            return "resume", current
        return "new", None

    def _remember(self, ctx: TaskContext, session_id: str) -> None:
        # NOTE: only a threaded conversation resumes, so only there does a context name one.
        if ctx.conversation != "threaded":
            return
        key = _key(ctx.owner, ctx.context_id)
        with self._cond:
            self._sessions[key] = session_id
            self._sessions.move_to_end(key)
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)

    # --- one task ----------------------------------------------------------

    def __call__(self, ctx: TaskContext) -> str | Completed:
        ctx.check_cancelled()
        mode, session_id = self._start_session(ctx)
        proc = self._spawn(ctx)
        ending = "kill"
        try:
            # NOTE: argv may hold a file system's bytes (surrogateescape); the trace is UTF-8 JSON.
            binary = os.fsencode(os.path.basename(self.argv[0])).decode("utf-8", "replace")
            ctx.record_event("harness_start", binary=binary,
                             pid=proc.pid, harness_session_id=session_id, session_mode=mode)
            message = ctx.message
            proc.send({"type": "task", "task_id": ctx.task_id, "context_id": ctx.context_id,
                       "text": ctx.text, "session": {"mode": mode, "id": session_id},
                       "message": None if message is None else message.to_wire(),
                       "caller": ctx.caller})
            response = self._converse(ctx, proc)
            ending = "close"
            return response
        except TaskCanceled:
            ending = "term"
            raise
        except (HarnessDeclined, TaskRejected):
            ending = "close"
            raise
        except HarnessFault as ex:
            if proc.stderr_tail:
                logger.warning("harness %s failed task %s: %s; its stderr ended with: %s",
                               proc.pid, ctx.task_id, ex, proc.stderr_tail)
            raise TaskFailed(str(ex)) from None
        finally:
            if ending == "term":
                # NOTE: here: the task is CANCELED already, and the capsule's slot is free
                # only once this returns, so no next harness runs beside this one.
                self._reap(proc, ending)
            else:
                # NOTE: not here: waiting out the grace would hold the task WORKING (and
                # the capsule busy) until the harness exits; the task ends as this returns.
                self._release(proc, ending)

    def _spawn(self, ctx: TaskContext) -> HarnessProcess:
        """Start the task's harness and register it in ``_live``.

        ``_starting`` counts the starts under way, which ``close()`` waits out; a start
        that counts itself after the session began closing gives up instead, so every
        harness started is one ``close()`` sees.
        """
        with self._cond:
            self._starting += 1
        try:
            if ctx.wait(0):                     # canceled, or the session is closing
                raise TaskCanceled(ctx.task_id)
            try:
                proc = HarnessProcess(self.argv, self.max_line_bytes, self.stderr_limit)
            except OSError as ex:
                raise TaskFailed(f"harness: cannot start {self.argv[0]}: "
                                 f"{ex.strerror or ex}") from None
            with self._cond:
                self._live[proc.pid] = proc
            return proc
        finally:
            with self._cond:
                self._starting -= 1
                self._cond.notify_all()

    def _release(self, proc: HarnessProcess, ending: str) -> None:
        """Hand the ending of ``proc`` to a reaper thread (here, if none can start)."""
        try:
            threading.Thread(target=logs.carrying_bound(self._reap), args=(proc, ending),
                             daemon=True, name=f"harness-{proc.pid}-reap").start()
        except RuntimeError:                    # no thread to be had (interpreter exit)
            self._reap(proc, ending)

    def _reap(self, proc: HarnessProcess, ending: str) -> None:
        """End ``proc``'s group (``ending``: close, term or kill); then drop it from ``_live``."""
        returncode = None
        try:
            returncode = proc.end(self.cancel_grace, term=ending == "term",
                                  close_first=ending == "close")
        except BaseException:
            logger.exception("harness %s: ending its process group failed", proc.pid)
            proc.signal_group(signal.SIGKILL)
            returncode = proc.wait_exit(REAP_SECS)
        finally:
            with self._cond:
                self._live.pop(proc.pid, None)
                self._exits[proc.pid] = returncode
                while len(self._exits) > EXITS_KEPT:
                    self._exits.popitem(last=False)
                self._cond.notify_all()

    def _converse(self, ctx: TaskContext, proc: HarnessProcess) -> str | Completed:
        """Read the harness's lines until ``response`` or ``complete``; raise on anything else.

        One wait on the process's events up to the idle deadline, also once stdout
        has closed (then the harness is given the rest of it to exit); a cancel, the
        session closing and a stderr flood each wake it with an event.
        """
        deadline = time.monotonic() + self.idle_timeout
        stdout_closed = False
        exited = None                           # the return code, once the harness exited
        handled = 0                             # the number of the last line taken
        ctx.on_cancel(proc.wake)
        while True:
            if ctx.wait(0):                     # canceled, or the session is closing
                raise TaskCanceled(ctx.task_id)
            # NOTE: the lines read before the flood came first: a response among them stands.
            if proc.flooded.is_set() and handled >= proc.flood_line:
                raise HarnessFault(f"harness: wrote more than {self.stderr_limit} bytes "
                                   "to stderr")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if exited is not None:
                    raise HarnessFault(f"harness: {exit_text(exited)} without a response")
                if stdout_closed:
                    raise HarnessFault("harness: closed its stdout without a response")
                raise HarnessFault(f"harness: no output for {self.idle_timeout:g}s "
                                   "(idle_timeout_secs)")
            event = proc.next_event(remaining)
            if event is None:
                continue
            kind, value = event
            if kind == "wake":
                continue
            if kind == "exit":
                raise HarnessFault(f"harness: {exit_text(value)} without a response")
            if kind == "exited":
                # NOTE: the lines it wrote are in the pipe, read at once: a process outside
                # its group holding its stdout keeps the task no longer than the drain.
                exited = value
                deadline = min(deadline, time.monotonic() + EXIT_DRAIN_SECS)
                continue
            if kind == "oversized":
                raise HarnessFault(f"harness: line {value} is longer than max_line_bytes "
                                   f"({self.max_line_bytes} bytes)")
            if kind == "eof":
                stdout_closed = True
                continue
            number, raw = value
            handled = number
            if raw.strip():
                response = self._handle(ctx, proc, number, raw)
                if response is not None:
                    return response
            elif exited is not None:    # NOTE: a blank line (a keepalive) renews the idle
                continue                # deadline while the harness lives, not the drain
            deadline = time.monotonic() + (self.idle_timeout if exited is None
                                           else min(self.idle_timeout, EXIT_DRAIN_SECS))

    def _handle(self, ctx: TaskContext, proc: HarnessProcess, line: int,
                raw: bytes) -> str | Completed | None:
        """Act on one line; return the task's outcome when it is one."""
        # NOTE: counted before the parse, whose recursion would end deep in RecursionError.
        if too_deep(raw, self.max_line_depth):
            raise HarnessFault(f"harness: line {line} nests deeper than max_line_depth "
                               f"({self.max_line_depth} levels)")
        try:
            # NOTE: decoded strictly: ``json.loads`` of bytes passes a lone surrogate's.
            msg = json.loads(raw.decode(json.detect_encoding(raw)), parse_constant=_no_constant)
        except ValueError:
            raise HarnessFault(f"harness: line {line} is not JSON") from None
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            raise HarnessFault(f"harness: line {line} is not a JSON object with a string type")
        kind = msg["type"]
        handler = _HANDLERS.get(kind)
        if handler is None:
            shown = json.dumps(kind[:40])
            raise HarnessFault(f"harness: line {line} has an unknown type {shown}")
        return handler(self, ctx, proc, msg, line)

    # --- the line types ------------------------------------------------------

    def _on_session(self, ctx, proc, msg, line):
        session_id = _field(msg, "id", str, "a non-empty string", line)
        if not session_id:
            raise HarnessFault(f"harness: line {line} (session): id must be a non-empty string")
        if utf8_bytes(session_id) > self.max_session_id_bytes:
            raise HarnessFault(f"harness: line {line} (session): id is longer than "
                               f"max_session_id_bytes ({self.max_session_id_bytes} bytes)")
        # NOTE: checked before it is kept: the next task's trace record carries it.
        self._remember(ctx, check_text(session_id, "session: id"))

    def _on_ask(self, ctx, proc, msg, line):
        question = _field(msg, "text", str, "a string", line)
        # NOTE: the harness may end while the task waits for its reply: its end (read
        # next, in _converse) fails the task rather than wait for a reply nobody takes.
        proc.on_trouble = ctx.interrupt_ask
        try:
            if proc.troubled:
                return None
            reply = ctx.ask(question)
        except AskInterrupted:
            return None
        finally:
            proc.on_trouble = None
        proc.send({"type": "reply", "text": reply.text})

    def _on_response(self, ctx, proc, msg, line):
        return _field(msg, "text", str, "a string", line)

    def _on_fail(self, ctx, proc, msg, line):
        message = _field(msg, "message", str, "a string", line)
        raise HarnessDeclined(" ".join(message.split()) or "the harness failed")

    # --- processes -----------------------------------------------------------

    def live_pids(self) -> list[int]:
        """The pids of the harness processes running now."""
        with self._cond:
            return sorted(self._live)

    def wait_gone(self, pid: int, timeout: float) -> tuple[bool, int | None]:
        """Wait until harness ``pid`` was reaped; (gone, its return code when known)."""
        with self._cond:
            gone = self._cond.wait_for(lambda: pid not in self._live, timeout)
            return gone, self._exits.get(pid)

    def close(self) -> None:
        """The session ends: SIGTERM every harness, SIGKILL what outlives the grace.

        Every harness counts, also one whose task has ended and that is being reaped.
        Returns once each was reaped (or ``REAP_SECS`` after the SIGKILL).
        """
        with self._cond:
            # NOTE: the session is closing already, so no start begins after these end.
            self._cond.wait_for(lambda: not self._starting, self.cancel_grace)
            procs = list(self._live.values())
        # NOTE: each reaper SIGKILLs its group again once the leader is reaped: gone too.
        if procs:
            procs = self._signal_all(procs, signal.SIGTERM, self.cancel_grace)
        if procs:
            procs = self._signal_all(procs, signal.SIGKILL, REAP_SECS)
        if procs:
            logger.error("harnesses %s did not end after SIGKILL", sorted(p.pid for p in procs))

    def _signal_all(self, procs: list, sig: int, timeout: float) -> list:
        """Send ``sig`` to each harness's group; the harnesses still live ``timeout`` later."""
        for proc in procs:
            proc.signal_group(sig)
        with self._cond:
            self._cond.wait_for(lambda: not self._live, timeout)
            return list(self._live.values())


# NOTE: a worker that exits without closing its door (gunicorn's SIGTERM) must not leave
# harnesses behind: they run in their own sessions, so nothing else would end them.
_AGENTS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for agent in list(_AGENTS):
        agent.close()


_HANDLERS = {"session": HarnessAgent._on_session, "ask": HarnessAgent._on_ask,
             "response": HarnessAgent._on_response, "fail": HarnessAgent._on_fail,
             **harness_stream_lines.HANDLERS, **harness_lines.HANDLERS}
