"""The operator's commands on the client: card, send, get, ps/tasks, subscribe, cancel,
push, and the door's own watch and stop.

Each runs through ``cli_support.run``, which finds the agent (``--url`` with ``--token``,
``--api-key``, ``--tenant``, ``--header``; ``$MURMUR_DOOR_URL``/``$MURMUR_DOOR_TOKEN``,
``$MURMUR_API_KEY``, ``$MURMUR_TENANT``; or the only running session's record) and
turns every error into one line and an exit status: 0 done (a task completed), 1 a task
failed, was canceled or rejected, or the door refused the request, 2 a usage or
connection error (or a listing stopped at ``--max-pages``), 3 a task waits for input. See
docs/client.md.
"""
from __future__ import annotations

import logging
import sys
import threading
from typing import TYPE_CHECKING

from murmur_wsgi.client import render
from murmur_wsgi.client.card import is_door
from murmur_wsgi.client.cli_support import (API_KEY_ENV, EXIT_INPUT, EXIT_OK, EXIT_TASK,
                                            EXIT_USAGE, TENANT_ENV, TOKEN_ENV, URL_ENV,
                                            UsageError, err, out, out_lines, positive, report,
                                            run, seconds, task_state, timestamp)
from murmur_wsgi.client.errors import ProtocolError, UnsupportedOperation
from murmur_wsgi.client.events import INPUT_REQUIRED, TERMINAL, state_word
from murmur_wsgi.client.progress import EMPTY, Latest, Spinner
from murmur_wsgi.client.push import MAX_PAGES, page_configs
from murmur_wsgi.client.seen import Recent

if TYPE_CHECKING:
    from murmur_wsgi.client.agent import DoorClient

logger = logging.getLogger(__name__)

TICK = 0.1                      # the spinner's turn, seconds
MAX_SHOWN = 1000                # the artifacts a stream's printer remembers having shown


# --- the commands ---------------------------------------------------------------------


def card(door: DoorClient, args) -> int:
    """Print the door's card (the extended card when a token reaches it)."""
    value = door.card()
    if door.token and (value.get("capabilities") or {}).get("extendedAgentCard"):
        value = door.extended_card()
    if args.json:
        out(render.dumps(value))
    else:
        for line in render.card_lines(value):
            out(line)
    return EXIT_OK


def send(door: DoorClient, args) -> int:
    """Send TEXT as a new task (or a reply with --task); print its outcome."""
    if args.no_wait:
        task = door.send(args.text, args.context, args.task, return_immediately=True)
        state = _state(task)
        if state is None or state in TERMINAL and state != "TASK_STATE_COMPLETED":
            return report(task, args.json)          # a message, or rejected (a busy door)
        if args.json:
            out(render.dumps(task))
        else:
            out(task.get("id", ""))
            err(f"task {task.get('id')} is {state_word(state)} in context "
                f"{task.get('contextId')}")
        return EXIT_OK
    if args.stream:
        return _send_streaming(door, args)
    spinner = Spinner(sys.stderr)
    if spinner.enabled and not args.json:
        task = _send_with_spinner(door, args, spinner)
    else:
        task = door.send(args.text, args.context, args.task)
    return report(task, args.json)


def _send_streaming(door: DoorClient, args) -> int:
    return _follow(door, door.stream(args.text, args.context, args.task), args)


def subscribe(door: DoorClient, args) -> int:
    """Print a live task's events (SubscribeToTask) until it ends or waits for input."""
    return _follow(door, door.subscribe(args.id), args)


def _replaces(event, shown: Recent) -> bool:
    """Whether ``event`` is an artifactUpdate replacing what was shown of its artifact
    (the hub's whole answer after its streamed tokens)."""
    if event.kind != "artifactUpdate" or event.frame is not None:
        return False
    artifact = event.payload.get("artifact")
    name = artifact.get("artifactId") if isinstance(artifact, dict) else None
    if not isinstance(name, str):
        return False
    return shown.seen(name) and event.payload.get("append") is not True


def _follow(door: DoorClient, stream, args) -> int:
    """Print a task stream's events; the exit status says how the task stands."""
    # The artifacts shown (the latest MAX_SHOWN, as digests): an update not appended replaces.
    shown = Recent(MAX_SHOWN)
    with stream:
        for event in stream:
            if args.json:
                out(render.event_json(event))
            elif event.frame != "connection-ack":
                out(render.event_line(event, False, replaced=_replaces(event, shown)))
            if event.task_id == stream.task_id and event.state == INPUT_REQUIRED:
                break
    if stream.task_id is None:
        err(f"{door.noun} at {door.url} ended the stream before naming a task")
        return EXIT_TASK
    if stream.state not in TERMINAL and stream.state != INPUT_REQUIRED:
        err(f"{door.noun} at {door.url} closed before task {stream.task_id} ended "
            f"(murmur-wsgi get {stream.task_id} follows it)")
        return EXIT_TASK
    return report(door.get(stream.task_id), as_json=False, show=False)


def _send_with_spinner(door: DoorClient, args, spinner: Spinner) -> dict:
    """Follow the task on a stream (no frames) in a thread; turn the spinner meanwhile."""
    try:
        stream = door.stream(args.text, args.context, args.task, frames=False)
        latest = Latest()           # the reader's latest event, its error, or None: the end

        def pump():
            end = None
            try:
                for event in stream:
                    latest.put(event)
                    if event.state == INPUT_REQUIRED and event.task_id == stream.task_id:
                        break
            except BaseException as ex:  # noqa: BLE001 - handed to the main thread
                end = ex
            finally:
                stream.close()
                latest.put(end)

        reader = threading.Thread(target=pump, name="murmur-wsgi-send", daemon=True)
        spinner.update("sending…")
        reader.start()
        while True:
            item = latest.take(TICK)
            if item is EMPTY:
                spinner.tick()
                continue
            if item is None:
                break
            if isinstance(item, BaseException):
                if isinstance(item, UnsupportedOperation) and stream.task_id is None:
                    spinner.clear()
                    return door.send(args.text, args.context, args.task)   # no streaming
                raise item
            said = item.text if item.kind != "artifactUpdate" else ""
            where = f"{stream.task_id or ''} [{state_word(stream.state)}]"
            spinner.update(f"{where} {said}".strip())
        reader.join(timeout=door._connect_timeout())
    finally:
        spinner.clear()
    if stream.task_id is None:
        raise ProtocolError(f"{door.noun} at {door.url} ended the stream before naming a task",
                            url=door.url)
    return door.get(stream.task_id)


def _state(task: dict) -> str | None:
    """The state of ``task``, or None for a message (an answer at once). The library refused
    a task whose state cannot be read and a message without parts (``client/http.py``)."""
    status = task.get("status")
    return status.get("state") if isinstance(status, dict) else None


def get(door: DoorClient, args) -> int:
    """Print one task; the exit status says how it stands."""
    task = door.get(args.id)
    state = _state(task)
    out_lines([render.dumps(task)] if args.json else render.task_lines(task))
    if state in TERMINAL and state != "TASK_STATE_COMPLETED":
        return EXIT_TASK
    return EXIT_INPUT if state == INPUT_REQUIRED else EXIT_OK


def tasks(door: DoorClient, args) -> int:
    """Print a table of the tasks the caller sees, most recently changed first: at most
    ``--limit`` tasks, from at most ``--max-pages`` pages (stopped there, it says so).

    MEMORY: a page's tasks are printed (``--json``) or handed to the table, which holds
    at most ``render.TABLE_BLOCK`` rows of short cells: nothing grows with the pages read.
    """
    table = None if args.json else render.Table(render.TASK_HEADER, out)
    shown, pages, more = 0, 0, False
    for page in door.list_pages(context_id=args.context, state=args.state,
                                status_timestamp_after=args.since, page_size=args.page_size,
                                max_pages=args.max_pages):
        pages += 1
        more = bool(page.get("nextPageToken"))
        for task in (t for t in page.get("tasks") or [] if isinstance(t, dict)):
            if table is None:
                out(render.dumps(task))
            else:
                table.add(render.task_row(task))
            shown += 1
            if args.limit and shown >= args.limit:
                return _listed(table, False, pages, shown, door)
    return _listed(table, more, pages, shown, door)


def _listed(table: render.Table | None, more: bool, pages: int, shown: int,
            door: DoorClient) -> int:
    """End the table (``--json`` printed its lines already); say so if pages remain."""
    if table is not None and shown:
        table.close()
    elif table is not None:
        out("no tasks")
    if not more:
        return EXIT_OK
    err(f"the listing stops after {pages} pages ({shown} tasks): {door.noun} at {door.url} "
        "still names a next page; --max-pages N reads more, --limit N fewer, and --state, "
        "--context or --since narrow it")
    return EXIT_USAGE


def _door_only(door: DoorClient, what: str) -> None:
    """Refuse a door's own method on an agent whose card is not a Murmur door's."""
    card = door.known_card or door.card()
    if not is_door(card):
        raise UsageError(f"{what} is a Murmur door's own method: {door.noun} at {door.url} "
                         "(a hub agent, or another A2A server) does not serve it")


def watch(door: DoorClient, args) -> int:
    """Print every task's events as they happen, until the door closes."""
    _door_only(door, "watch (murmur.WatchSession)")
    stream = door.watch(last_event_id=args.last_event_id)
    with stream:
        for event in stream:
            if args.json:
                out(render.event_json(event))
            elif event.frame == "connection-ack":
                err(f"watching {door.noun} at {door.url} "
                    f"({event.fields.get('role')}, {event.fields.get('conversationMode')})")
            else:
                out(render.event_line(event))
    return EXIT_OK if stream.ended == "capsule-closed" else EXIT_USAGE


def cancel(door: DoorClient, args) -> int:
    """Cancel a task; print it and what the session still runs."""
    task = door.cancel(args.id)
    state = _state(task)
    if args.json:
        out(render.dumps(task))
        return EXIT_OK
    lines = [f"task:     {task.get('id')}", f"state:    {state_word(state)}"]
    for artifact in task.get("artifacts") or []:
        if isinstance(artifact, dict) and artifact.get("artifactId") == "residue":
            lines.extend(render.residue_lines([p.get("data") for p in artifact.get("parts")
                                               or [] if isinstance(p, dict)]))
    out_lines(lines)
    return EXIT_OK


def stop(door: DoorClient, args) -> int:
    """Cancel every live task of the session (murmur.StopSession); the door keeps serving."""
    _door_only(door, "stop (murmur.StopSession)")
    answer = door.stop()
    if args.json:
        out(render.dumps(answer))
        return EXIT_OK
    canceled = answer.get("canceled") or []
    residue = answer.get("residue") or []
    out_lines([f"stopped:  {answer.get('session_id')} at {door.url}",
            f"canceled: {', '.join(canceled) if canceled else 'nothing was running'}",
            *render.residue_lines(residue),
            *([] if residue else ["residue:  nothing else was left running"])])
    return EXIT_OK


def push(door: DoorClient, args) -> int:
    """Push notification configs of a task: create, get, list, delete."""
    if args.action == "create":
        if not args.url_to:
            raise UsageError("push create needs --to URL (the webhook)")
        value = door.push_create(args.task_id, args.url_to, token=args.push_token,
                                 config_id=args.config_id)
    elif args.action == "list":
        return _push_list(door, args)
    elif not args.config_id:
        raise UsageError(f"push {args.action} needs --config ID")
    elif args.action == "get":
        value = door.push_get(args.task_id, args.config_id)
    else:
        door.push_delete(args.task_id, args.config_id)
        if not args.json:
            out(f"deleted:  {args.config_id} of task {args.task_id}")
            return EXIT_OK
        value = {}
    out(render.dumps(value))
    return EXIT_OK


def _push_list(door: DoorClient, args) -> int:
    """Print a task's push configs, each page's as it arrives (``--json``: one config a
    line), from at most ``MAX_PAGES`` pages (past them, exit 2). MEMORY: a page at a time
    (all kept until the last, a server's pages of millions of configs took GBs)."""
    line = render.dumps if args.json else render.push_config_line
    shown, page = 0, {}
    for page in door.push_pages(args.task_id, max_pages=MAX_PAGES):
        lines = [line(config) for config in page_configs(page)]
        out_lines(lines)
        shown += len(lines)
    door.push_pages_ended(page, MAX_PAGES)
    if not shown and not args.json:
        out("no push configs")
    return EXIT_OK


# --- the parser -----------------------------------------------------------------------


def _door_options(parser) -> None:
    group = parser.add_argument_group("the agent")
    group.add_argument("--url", help="a door's address, a hub agent's URL "
                       "(http://host:port/a2a/v1/agents/NAME) or a card's URL (default: "
                       f"${URL_ENV}, or the only running session's record)")
    group.add_argument("--token", help=f"a bearer token: a door's, a hub's JWT (default: "
                       f"${TOKEN_ENV} with --url, or the record's operator token)")
    group.add_argument("--api-key", help=f"an API key, sent as X-API-Key (default: "
                       f"${API_KEY_ENV})")
    group.add_argument("--tenant", help=f"the tenant a JWT acts for, sent as X-Tenant-ID "
                       f"(default: ${TENANT_ENV})")
    group.add_argument("--header", action="append", metavar="'NAME: VALUE'",
                       help="one more header on every request (repeatable)")
    group.add_argument("--session", help="a running session's id, to read its record")
    group.add_argument("--timeout", type=seconds, default=10.0,
                       help="seconds to wait for an answer (default 10; a held send waits "
                       "for its task)")
    group.add_argument("--json", action="store_true", help="print JSON for scripts")


def add_commands(sub) -> None:
    """Register the client's subcommands on ``murmur-wsgi``'s subparsers."""
    p = sub.add_parser("card", help="print the door's agent card")
    p.set_defaults(func=run(card))
    _door_options(p)
    p = sub.add_parser("send", help="send TEXT as a task and print its outcome")
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--stream", action="store_true", help="print the task's events as they come")
    p.add_argument("--context", help="the contextId to send in")
    p.add_argument("--task", help="reply to this task, which waits for input")
    p.add_argument("--no-wait", action="store_true",
                   help="return once the task is accepted (returnImmediately)")
    p.set_defaults(func=run(send))
    _door_options(p)
    p = sub.add_parser("get", help="print one task")
    p.add_argument("id", metavar="ID")
    p.set_defaults(func=run(get))
    _door_options(p)
    for name in ("tasks", "ps"):
        p = sub.add_parser(name, help="a table of the tasks you see")
        p.add_argument("--context", help="only this contextId")
        p.add_argument("--state", type=task_state,
                       help="only this state: completed, failed, input-required, ... "
                       "or a TASK_STATE_* name")
        p.add_argument("--limit", type=positive, help="at most this many tasks")
        p.add_argument("--since", metavar="RFC3339", type=timestamp,
                       help="only tasks changed after this time (2026-01-01T00:00:00Z)")
        p.add_argument("--page-size", type=positive, help="tasks per ListTasks page")
        p.add_argument("--max-pages", type=positive, default=MAX_PAGES,
                       help=f"stop after this many pages, and say so (default {MAX_PAGES})")
        p.set_defaults(func=run(tasks))
        _door_options(p)
    p = sub.add_parser("subscribe", help="print a live task's events until it ends")
    p.add_argument("id", metavar="ID")
    p.set_defaults(func=run(subscribe))
    _door_options(p)
    p = sub.add_parser("push", help="a task's push notification configs (a hub with push)")
    p.add_argument("action", choices=["create", "get", "list", "delete"])
    p.add_argument("task_id", metavar="TASK_ID")
    p.add_argument("--to", dest="url_to", metavar="URL", help="create: the webhook URL")
    p.add_argument("--config", dest="config_id", metavar="ID",
                   help="the config's id (get, delete; create: its own id)")
    p.add_argument("--push-token", help="create: the token the notifications carry")
    p.set_defaults(func=run(push))
    _door_options(p)
    p = sub.add_parser("watch", help="print the session's live events until the door closes")
    p.add_argument("--last-event-id", type=int, help="replay the events after this id")
    p.set_defaults(func=run(watch))
    _door_options(p)
    p = sub.add_parser("cancel", help="cancel a task")
    p.add_argument("id", metavar="ID")
    p.set_defaults(func=run(cancel))
    _door_options(p)
    p = sub.add_parser("stop", help="cancel every live task of the session")
    p.set_defaults(func=run(stop))
    _door_options(p)

