"""What every client command shares: finding the agent, exit statuses, errors as one line,
the values its options take.

The agent is ``--url`` (a door's address, a hub agent's URL or a card's URL),
else ``$MURMUR_DOOR_URL`` (token: ``--token``, else ``$MURMUR_DOOR_TOKEN``),
else the running record of the only running session (or of ``--session``),
which names a door's address and its operator token. ``--api-key`` (else
``$MURMUR_API_KEY``), ``--tenant`` (else ``$MURMUR_TENANT``) and ``--header
'K: V'`` go with every request too. A credential on the command line is sent
alone: the other kind's variable is not read beside it.
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import re
import sys
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from murmur_wsgi.client import render
from murmur_wsgi.client.card import door_url
from murmur_wsgi.client.errors import DoorError, HttpRefusal, RpcError, VersionError
from murmur_wsgi.client.events import INPUT_REQUIRED, STATES, TERMINAL, state_word
from murmur_wsgi import running
from murmur_wsgi.rfc3339 import rfc3339_us

if TYPE_CHECKING:
    from murmur_wsgi.client.agent import DoorClient

logger = logging.getLogger(__name__)

URL_ENV = "MURMUR_DOOR_URL"
TOKEN_ENV = "MURMUR_DOOR_TOKEN"
API_KEY_ENV = "MURMUR_API_KEY"
TENANT_ENV = "MURMUR_TENANT"
EXIT_OK, EXIT_TASK, EXIT_USAGE, EXIT_INPUT = 0, 1, 2, 3


class UsageError(Exception):
    """No door to talk to, or arguments that cannot work together."""


def out(line: str = "") -> None:
    render.write(sys.stdout, render.printable(line) + "\n")


def out_lines(lines: list[str]) -> None:
    """Print ``lines``, all made first: an answer that cannot be read prints nothing."""
    for line in lines:
        out(line)


ERR_CHARS = 4000               # the most of an error line a command prints

# A URL's password (``scheme://user:PASSWORD@``): requests sends it as Basic auth, and
# the lines naming the agent's URL printed it.
_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^/\s:@]*):[^/\s@]*@")


def err(line: str) -> None:
    """One line on stderr, a URL's password shown as ``***``; past ``ERR_CHARS``, cut
    and its length told (a server's own message, quoted in a refusal, may be megabytes:
    no terminal line should be)."""
    line = _PASSWORD.sub(r"\1:***@", line)
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"

    def printed(text: str) -> str:
        # NOTE: as render.write prints it: what stderr's encoding cannot hold (ASCII,
        # Latin-1) as a backslash escape, up to 10 characters for one.
        text = render.printable(text)
        return text.encode(encoding, "backslashreplace").decode(encoding)

    head = line[:ERR_CHARS]
    shown = printed(head)
    if len(shown) > ERR_CHARS:
        # NOTE: the bound is the line as printed: printable() writes a control character
        # as 4 (\x1b) or 10 (\U000e0001); the characters that fit, each escaped alike.
        pieces, size = [], 0
        for char in head:
            piece = printed(char)
            if size + len(piece) > ERR_CHARS:
                break
            pieces.append(piece)
            size += len(piece)
        shown, head = "".join(pieces), head[:len(pieces)]
    if len(head) < len(line):
        shown = f"{shown}… ({len(line) - len(head)} more characters)"
    render.write(sys.stderr, f"murmur-wsgi: {shown}\n")


# --- finding the door -----------------------------------------------------------------


def header_pairs(values) -> dict:
    """``--header 'K: V'`` (repeated) as a dict; a value without ``:`` is a UsageError,
    which names the header but never shows its value (a key, a token)."""
    headers = {}
    for value in values or []:
        name, sep, text = value.partition(":")
        if not sep or not name.strip() or any(c in name for c in " \t\r\n") \
                or any(c in text for c in "\r\n"):
            named = (value.split() or [""])[0].split(":")[0]
            shown = f"'{named} …'" if named else "one with no name"
            raise UsageError(f"--header: {shown} is not 'Name: value' (its value is not "
                             "shown)")
        headers[name.strip()] = text.strip()
    return headers


def find_door(args) -> DoorClient:
    """The agent ``--url``, ``$MURMUR_DOOR_URL`` or the only running record names."""
    from murmur_wsgi.client.agent import DoorClient     # PERF: requests, once a command runs

    headers = header_pairs(getattr(args, "header", None))
    # NOTE: a credential on the command line is sent alone: the other kind's variable,
    # left in the environment, would make a hub refuse both (401 "send one credential").
    api_key = getattr(args, "api_key", None) or None
    token = args.token or None
    if not api_key and not token:
        api_key = os.environ.get(API_KEY_ENV) or None
    tenant = getattr(args, "tenant", None) or os.environ.get(TENANT_ENV) or None
    url = args.url or os.environ.get(URL_ENV)
    if url:
        if not token and not getattr(args, "api_key", None) and os.environ.get(TOKEN_ENV):
            token = os.environ[TOKEN_ENV]
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
    try:
        # NOTE: urllib refuses some addresses with ValueError (a bracket left open, a
        # bracketed host that is no IP address), which requests lets through unwrapped.
        urlsplit(door_url(url))
    except ValueError as ex:
        raise UsageError(f"{render.printable(url)} is not a URL: {ex}") from None
    return DoorClient(url, token, api_key=api_key, tenant=tenant, headers=headers,
                      timeout=args.timeout)


def _object(value) -> dict:
    return value if isinstance(value, dict) else {}


def _scheme_hint(scheme: dict) -> str | None:
    """What to give for one of the card's ``securitySchemes`` (a server's value of
    another shape reads as naming nothing: this runs while a refusal is reported)."""
    if not isinstance(scheme, dict):
        return None
    if "apiKeySecurityScheme" in scheme:
        name = _object(scheme["apiKeySecurityScheme"]).get("name")
        name = name if isinstance(name, str) and name else "X-API-Key"
        if name.lower() == "x-api-key":
            return f"--api-key KEY (or ${API_KEY_ENV})"
        return f"--header '{name}: KEY'"
    if "httpAuthSecurityScheme" in scheme:
        described = str(_object(scheme["httpAuthSecurityScheme"]).get("description") or "")
        if "X-Tenant-ID" in described:
            return f"--token JWT with --tenant TENANT (or ${TOKEN_ENV}, ${TENANT_ENV})"
        return f"--token TOKEN (or ${TOKEN_ENV}; murmur-wsgi token prints a door's)"
    return None


def _hub_hint(door: DoorClient, error: str, args) -> str:
    """What a hub's 401 asks for, after what the command sent it (never the values)."""
    key_from = "--api-key" if getattr(args, "api_key", None) else f"${API_KEY_ENV}"
    token_from = "--token" if getattr(args, "token", None) else (
        f"${TOKEN_ENV}" if getattr(args, "url", None) or os.environ.get(URL_ENV)
        else "the running record")
    if door.api_key and door.token:
        return (f"; it was sent an API key ({key_from}) and a token ({token_from}): "
                "give one of them")
    if error == "no tenant in context":
        return f"; a JWT needs the tenant it acts for: --tenant TENANT (or ${TENANT_ENV})"
    if error == "unauthenticated" and door.api_key:
        return (f"; it did not accept the API key from {key_from}: give a key of the "
                "agent's tenant that is not revoked")
    if error == "unauthenticated" and door.token:
        acting = f" for tenant '{door.tenant}'" if door.tenant else ""
        return (f"; it did not accept the JWT from {token_from}{acting}: give one the hub "
                "verifies (its auth.jwt), not expired, whose tenants claim names the tenant")
    return (f"; a hub agent takes --api-key KEY (or ${API_KEY_ENV}), or --token JWT "
            f"with --tenant TENANT")


def unauthenticated_hint(door: DoorClient, response, error: str = "", args=None) -> str:
    """What a 401 asks for: the card's securitySchemes, else the server's challenge (a
    hub's: what it did not accept of what ``args`` sent)."""
    card = door.known_card
    schemes = _object(_object(card).get("securitySchemes"))
    hints = [h for h in (_scheme_hint(s) for s in schemes.values()) if h]
    if hints:
        return "; its card asks for " + ", or ".join(hints)
    challenge = response.headers.get("WWW-Authenticate", "") if response is not None else ""
    if "murmur-hub" in challenge:
        return _hub_hint(door, error, args)
    return f"; give --token or set {TOKEN_ENV} (murmur-wsgi token prints one)"


def _hint_version(door: DoorClient, ex: VersionError) -> str:
    sent = door.headers.get("A2A-Version", "")
    speaks = ex.supported_versions or "another version"
    # NOTE: an empty one is what a proxy that drops the header makes; none (or one that is
    # no string) says nothing of what the server received.
    if "requestedVersion" in ex.metadata and ex.requested_version != sent:
        return (f"{door.noun} at {door.url} speaks A2A {speaks}; it received A2A-Version "
                f"'{ex.requested_version}', not the {sent} this client sent: something "
                "between them drops or rewrites the header")
    return (f"{door.noun} at {door.url} speaks A2A {speaks}, not the A2A {sent} this client "
            f"speaks: use a client for A2A {speaks}")


def _refused(door: DoorClient, ex: RpcError) -> str:
    meta = ", ".join(f"{k} {v}" for k, v in ex.metadata.items())
    reason = f" {ex.reason}" if ex.reason else ""
    return (f"{door.noun} at {door.url} answered {ex.code}{reason}: {ex.message}"
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
            hint = unauthenticated_hint(door, ex.response, ex.error, args) \
                if ex.status == 401 else ""
            said = f": {ex.message}" if ex.message else ""
            err(f"{door.noun} at {door.url} refused the request: {ex.status} {ex.error}"
                f"{said}{hint}")
            return EXIT_USAGE
        except DoorError as ex:
            # NOTE: the client's own text names the agent's address already (once).
            err(str(ex))
            return EXIT_USAGE
        except UsageError as ex:
            err(str(ex))
            return EXIT_USAGE
        except (AttributeError, TypeError, KeyError, IndexError) as ex:
            # NOTE: a value of another shape than A2A's, deep in an answer the command prints.
            logger.debug("%s: an answer of an unexpected shape", command.__name__, exc_info=True)
            err(f"{door.noun} at {door.url} answered something this command cannot read "
                f"({type(ex).__name__}: {str(ex)[:200]})")
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
    if "status" not in task and "parts" in task:
        # A Message, not a Task: the agent answered at once.
        if show:
            out(render.dumps(task) if as_json else render.parts_text(task.get("parts")))
        return EXIT_OK
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


# --- the options' values (argparse types) ---------------------------------------------


def positive(value: str) -> int:
    """A whole number from 1."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"'{value}' is not a whole number from 1")
    return number


MAX_TIMEOUT = 86400.0           # seconds: --timeout's largest (a socket takes no endless one)


def seconds(value: str) -> float:
    """``--timeout``: a number of seconds above 0, at most a day."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not 0 < number <= MAX_TIMEOUT:       # NaN fails too
        raise argparse.ArgumentTypeError(f"'{value}' is not a number of seconds above 0 "
                                         f"and at most {MAX_TIMEOUT:.0f}")
    return number


def timestamp(value: str) -> str:
    """``--since``: an RFC 3339 timestamp with a zone, as ListTasks' statusTimestampAfter
    takes it (checked here: a server's -32602 would be exit 1, not a usage error)."""
    if rfc3339_us(value) is None:
        raise argparse.ArgumentTypeError(f"'{value}' is not an RFC 3339 timestamp with a "
                                         "zone, such as 2026-01-01T00:00:00Z")
    return value


def task_state(value: str) -> str:
    """``--state``: a state's word (``input-required``) or its ``TASK_STATE_*`` name."""
    if value in STATES:
        return STATES[value]
    if value.upper() in STATES.values():
        return value.upper()
    raise argparse.ArgumentTypeError(f"'{value}' is not a task state; use one of "
                                     + ", ".join(STATES))
