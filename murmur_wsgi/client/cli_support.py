"""What every client command shares: finding the door, exit statuses, errors as one line.

The door is ``--url``, else ``$MURMUR_DOOR_URL`` (token: ``--token``, else
``$MURMUR_DOOR_TOKEN``), else the running record of the only running session
(or of ``--session``), which names the address and the operator token.
"""
from __future__ import annotations

import logging
import os
import sys

from murmur_wsgi.client import render
from murmur_wsgi.client.door import DoorClient
from murmur_wsgi.client.errors import (ConnectionFailed, DoorError, HttpRefusal, ProtocolError,
                                       RpcError, Timeout, VersionError)
from murmur_wsgi.client.events import INPUT_REQUIRED, TERMINAL, state_word
from murmur_wsgi import running

logger = logging.getLogger(__name__)

URL_ENV = "MURMUR_DOOR_URL"
TOKEN_ENV = "MURMUR_DOOR_TOKEN"
EXIT_OK, EXIT_TASK, EXIT_USAGE, EXIT_INPUT = 0, 1, 2, 3


class UsageError(Exception):
    """No door to talk to, or arguments that cannot work together."""


def out(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def err(line: str) -> None:
    sys.stderr.write(f"murmur-wsgi: {line}\n")
    sys.stderr.flush()


# --- finding the door -----------------------------------------------------------------


def find_door(args) -> DoorClient:
    """The door ``--url``, ``$MURMUR_DOOR_URL`` or the only running record names."""
    url = args.url or os.environ.get(URL_ENV)
    token = args.token or None
    if url:
        token = token or os.environ.get(TOKEN_ENV) or None
    else:
        if args.session:
            record = running.find_record(args.session)
            if record is None:
                raise UsageError(f"no running session {args.session} under "
                                 f"{running.running_dir()}")
        else:
            live = running.running_records()
            if not live:
                raise UsageError(f"no door to talk to: give --url URL or set {URL_ENV} "
                                 f"(no running session under {running.running_dir()})")
            if len(live) > 1:
                names = ", ".join(f"{r['session_id']} ({r.get('url')})" for r in live)
                raise UsageError(f"{len(live)} sessions are running; name one with "
                                 f"--session or --url: {names}")
            record = live[0]
        url = record["url"]
        token = token or record.get("door_token")
    return DoorClient(url, token, timeout=args.timeout)


def _hint_version(door: DoorClient, ex: VersionError) -> str:
    sent = door.headers.get("A2A-Version", "")
    speaks = ex.supported_versions or "another version"
    if ex.requested_version != sent:
        return (f"the door at {door.url} speaks A2A {speaks}; it received A2A-Version "
                f"'{ex.requested_version}', not the {sent} this client sent: something "
                "between them drops or rewrites the header")
    return (f"the door at {door.url} speaks A2A {speaks}, not the A2A {sent} this client "
            f"speaks: use a client for A2A {speaks}")


def _refused(door: DoorClient, ex: RpcError) -> str:
    meta = ", ".join(f"{k} {v}" for k, v in ex.metadata.items())
    reason = f" {ex.reason}" if ex.reason else ""
    return (f"the door at {door.url} answered {ex.code}{reason}: {ex.message}"
            + (f" ({meta})" if meta else ""))


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run(command):
    """Wrap a command: find the door, run, and turn every error into one line and a status."""
    def wrapped(args) -> int:
        try:
            door = find_door(args)
        except UsageError as ex:
            err(str(ex))
            return EXIT_USAGE
        try:
            return command(door, args)
        except VersionError as ex:
            err(_hint_version(door, ex))
            return EXIT_USAGE
        except RpcError as ex:
            err(_refused(door, ex))
            return EXIT_TASK
        except HttpRefusal as ex:
            hint = ""
            if ex.status == 401:
                hint = f"; give --token or set {TOKEN_ENV} (murmur-wsgi token prints one)"
            err(f"the door at {door.url} refused the request: {ex.status} {ex.error}: "
                f"{ex.message}{hint}")
            return EXIT_USAGE
        except (ConnectionFailed, Timeout, ProtocolError) as ex:
            err(str(ex))
            return EXIT_USAGE
        except DoorError as ex:
            err(f"the door at {door.url}: {ex}")
            return EXIT_USAGE
        except KeyboardInterrupt:
            sys.stderr.write("\n")
            return 130
        except BrokenPipeError:
            _quiet_stdout()         # the reader of the pipe left (| head): stop quietly
            return EXIT_OK
        finally:
            door.close()
    wrapped.__name__ = command.__name__
    wrapped.__doc__ = command.__doc__
    return wrapped


# --- the outcome of a task ------------------------------------------------------------


def report(task: dict, as_json: bool, show: bool = True) -> int:
    """Print a settled task's outcome; return the exit status its state means.

    ``show``: print the response (or the prompt) on stdout; a stream printed it already.
    """
    state = (task.get("status") or {}).get("state")
    if as_json and show:
        out(render.dumps(task))
        show = False
    task_id = task.get("id")
    if state == "TASK_STATE_COMPLETED":
        response = render.response_of(task)
        if response is not None and show:
            out(response)
        return EXIT_OK
    if state == INPUT_REQUIRED:
        if show:
            out(render.prompt_of(task))
        err(f"task {task_id} waits for input; reply with: murmur-wsgi send --task {task_id} "
            "TEXT")
        return EXIT_INPUT
    said = render.status_text(task.get("status"))
    if state in TERMINAL:
        err(f"task {task_id} {state_word(state)}" + (f": {said}" if said else ""))
        return EXIT_TASK
    err(f"task {task_id} is {state_word(state)}: the door answered before it settled "
        f"(murmur-wsgi get {task_id} follows it)")
    return EXIT_TASK
