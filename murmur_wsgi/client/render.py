"""What the command line prints: cards, tasks, tables, stream events and residue.

Every text a server wrote reaches the terminal through ``printable`` (``out``
and ``err`` apply it): a control character (ESC, BEL, CR, the C1 block),
a bidirectional override and a lone surrogate are shown as their escape
(``\\x1b``, ``\\u202e``), so an agent's name or a task's text can neither
drive the terminal nor make the output unwritable. ``dumps`` writes them as
JSON escapes, the same values. ``write`` puts a line on a stream whose encoding
cannot hold every character (ASCII, Latin-1) with those as backslash escapes.
"""
from __future__ import annotations

import json
import logging
import re

from murmur_wsgi.client.events import (StreamEvent, artifact_text, parts_text, state_word,
                                       status_text)
from murmur_wsgi.uris import CAPSULE_URI, DOOR_URI, STREAM_URI

logger = logging.getLogger(__name__)


# C0 but newline and tab, DEL and C1, the bidirectional overrides, lone surrogates.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
                          "\ud800-\udfff]")
_JSON_UNPRINTABLE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with what would drive a terminal (or cannot be encoded) shown escaped."""
    return _UNPRINTABLE.sub(_escape, text)


def write(stream, text: str) -> None:
    """Write ``text`` on ``stream`` and flush: what its encoding cannot hold (a terminal or
    a pipe in ASCII or Latin-1) as backslash escapes (``\\u2192``), never a
    ``UnicodeEncodeError``."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        # NOTE: a text stream encodes the whole text before it writes any of it.
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()


def dumps(value) -> str:
    """JSON, non-ASCII text as is, but every character ``printable`` escapes as ``\\uXXXX``."""
    return _JSON_UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}",
                                 json.dumps(value, ensure_ascii=False))


def extension(card: dict, uri: str) -> dict | None:
    """The params of the card's extension ``uri`` (found by uri, never by position)."""
    for ext in (card.get("capabilities") or {}).get("extensions") or []:
        if isinstance(ext, dict) and ext.get("uri") == uri:
            return ext.get("params") or {}
    return None


def _scheme_word(scheme) -> str:
    """One of a card's securitySchemes, in a few words."""
    if isinstance(scheme, dict) and "apiKeySecurityScheme" in scheme:
        return f"API key ({(scheme['apiKeySecurityScheme'] or {}).get('name') or 'X-API-Key'})"
    described = str(((scheme or {}).get("httpAuthSecurityScheme") or {}).get("description")
                    or "") if isinstance(scheme, dict) else ""
    return "bearer JWT with X-Tenant-ID" if "X-Tenant-ID" in described else "bearer token"


def card_lines(card: dict) -> list[str]:
    """A card, as a person reads it."""
    lines = [f"{card.get('name', '?')} {card.get('version', '')}".rstrip()]
    for iface in card.get("supportedInterfaces") or []:
        lines.append(f"url:       {iface.get('url')} ({iface.get('protocolBinding')}, "
                     f"A2A {iface.get('protocolVersion')})")
    capsule = extension(card, CAPSULE_URI)
    if capsule is not None:
        lines.append(f"session:   {capsule.get('sessionId')}")
    caps = card.get("capabilities") or {}
    schemes = card.get("securitySchemes") or {}
    door = " or ".join(_scheme_word(s) for s in schemes.values()) if schemes else "public"
    if caps.get("extendedAgentCard"):
        door += " (extended card: GetExtendedAgentCard)"
    lines.append(f"door:      {door}")
    lines.append(f"streaming: {'yes' if caps.get('streaming') else 'no'}")
    methods = extension(card, DOOR_URI)
    if methods is not None:
        lines.append(f"methods:   {', '.join(methods.get('methods') or [])}")
        lines.append(f"peers:     {'accepted' if methods.get('peerTasks') else 'refused'}")
    stream = extension(card, STREAM_URI)
    if stream is not None:
        lines.append(f"frames:    {', '.join(stream.get('frames') or [])}")
    if capsule is not None:
        tools = ", ".join(capsule.get("tools") or []) or "none"
        lines.append(f"tools:     {tools}; shell {'yes' if capsule.get('shell') else 'no'}, "
                     f"network {'yes' if capsule.get('network') else 'no'}, "
                     f"planes: {', '.join(capsule.get('planes') or []) or 'none'}")
    skills = [f"{s.get('id')} ({s.get('name')})" for s in card.get("skills") or []]
    lines.append(f"skills:    {', '.join(skills) or 'none'}")
    return lines


def task_lines(task: dict) -> list[str]:
    """A task (GetTask's answer), as a person reads it."""
    status = task.get("status") or {}
    lines = [f"task:     {task.get('id')}",
             f"context:  {task.get('contextId')}",
             f"state:    {state_word(status.get('state'))}",
             f"updated:  {status.get('timestamp', '')}"]
    said = status_text(status)
    if said:
        lines.append(f"status:   {said}")
    for artifact in task.get("artifacts") or []:
        name = artifact.get("artifactId") or artifact.get("name") or "artifact"
        if name == "residue":
            lines.extend(residue_lines([p.get("data") for p in artifact.get("parts") or []
                                        if isinstance(p, dict)]))
            continue
        text, usage = split_usage(artifact.get("parts"))
        if text or usage is None:
            lines.append(f"{name + ':':<9} {indent(text, 10)}")
        if usage is not None:
            lines.append(f"usage:    {usage}")
    murmur = (task.get("metadata") or {}).get("murmur") or {}
    for cmd in murmur.get("runningCommands") or []:
        lines.append(f"running:  {cmd.get('workId')} {cmd.get('binary')} {cmd.get('command')} "
                     f"({cmd.get('runningMs')} ms)")
    for member in murmur.get("noAnswerBelow") or []:
        lines.append(f"no answer: {member.get('member')} ({member.get('status')})")
    return lines


def residue_lines(items) -> list[str]:
    """mur cancel / mur stop's lines for residue items: ``running:`` and ``ended:``."""
    lines = []
    for item in items or []:
        if not isinstance(item, dict):
            continue
        if item.get("kind") == "detached_shell":
            lines.append(f"running:  {item.get('work_id')} detached shell {item.get('command')}")
        elif item.get("kind") == "delegation":
            lines.append(f"ended:    {item.get('delegation_id')} delegation "
                         f"{item.get('capsule')}@{item.get('version')}")
        else:
            lines.append(f"residue:  {dumps(item)}")
    return lines


def indent(text: str, width: int) -> str:
    return text.replace("\n", "\n" + " " * width)


TABLE_BLOCK = 1000               # the rows a table holds to size its columns
CELL = 80                        # the characters a table's cell shows of a server's value


class Table:
    """A table printed as its rows come, through ``emit(line)``: its columns are as wide
    as the widest cell of the header and the first ``block`` rows, which are held until
    then (or until ``close``); a later row's longer cell pushes its line past them. The
    last column is never padded.

    MEMORY: at most ``block`` rows are held, however many pages a listing reads.
    """

    def __init__(self, header: list[str], emit, block: int | None = None):
        self.header = header
        self.rows = 0                # the rows added
        self._emit = emit
        self._block = TABLE_BLOCK if block is None else block
        self._held: list[list[str]] | None = []
        self._widths: list[int] = []

    def add(self, row: list[str]) -> None:
        self.rows += 1
        if self._held is None:
            self._emit(self._line(row))
            return
        self._held.append(row)
        if len(self._held) >= self._block:
            self.close()

    def close(self) -> None:
        """Print what is held (the header first); later rows are printed as they come."""
        if self._held is None:
            return
        lines = [self.header, *self._held]
        self._widths = [max(len(str(r[i])) for r in lines) for i in range(len(self.header))]
        self._held = None
        for row in lines:
            self._emit(self._line(row))

    def _line(self, row: list[str]) -> str:
        cells = [str(c).ljust(w) for c, w in zip(row[:-1], self._widths[:-1])] + [str(row[-1])]
        return "  ".join(cells).rstrip()


def cell(value, width: int = CELL) -> str:
    """A server's value as a table's cell: at most ``width`` characters, cut with ``…``."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def task_row(task: dict) -> list[str]:
    """A task as ``TASK_HEADER``'s cells, each at most ``CELL`` characters."""
    status = task.get("status") or {}
    said = " ".join(status_text(status).split())
    return [cell(task.get("id", "")), cell(state_word(status.get("state"))),
            cell(status.get("timestamp", "")), cell(task.get("contextId", "")),
            cell(said, 60)]


TASK_HEADER = ["TASK", "STATE", "UPDATED", "CONTEXT", "STATUS"]


def push_config_line(config: dict) -> str:
    """A push config as ``push list`` prints it: ``ID  URL  failures N`` (``  disabled``)."""
    status = config.get("deliveryStatus") or {}
    return (f"{config.get('id')}  {config.get('url')}  failures {status.get('failures', 0)}"
            + ("  disabled" if status.get("disabled") else ""))


def describe(event: StreamEvent, replaced: bool = False) -> tuple[str, str]:
    """``(tag, text)``: what a person reads of one event, as ``[tag]  text``
    (``replaced``: an artifactUpdate that replaces what came before of its artifact)."""
    if event.frame is not None:
        fields = event.fields
        if event.frame == "text":
            return "text", fields.get("text") if isinstance(fields.get("text"), str) \
                else event.text
        if event.frame == "tool-call-started":
            return "tool", f"{fields.get('toolName')} started ({fields.get('toolCallId')})"
        if event.frame == "tool-call-progress":
            return "tool", str(fields.get("text") or event.text)
        if event.frame == "artifact":
            return "artifact", f"{fields.get('toolName')}: {fields.get('content') or ''}".rstrip()
        if event.frame == "capsule-closed":
            return "capsule-closed", "the door closed"
        return event.frame, event.text
    if event.kind == "artifactUpdate":
        artifact = event.payload.get("artifact") or {}
        text, usage = split_usage(artifact.get("parts") if isinstance(artifact, dict) else None)
        if usage is not None:
            text = f"{text}\nusage: {usage}" if text else f"usage: {usage}"
        return "replaced" if replaced else "artifact", f"{artifact.get('artifactId')}: {text}"
    if event.kind == "message":
        return "message", event.text
    return state_word(event.state), event.text


def event_line(event: StreamEvent, with_task: bool = True, replaced: bool = False) -> str:
    """``tsk_…  [working]  slept 1s of 3s``: one event, a person's way."""
    tag, text = describe(event, replaced)
    head = f"[{tag}]"
    line = f"{head:<13} {text}".rstrip() if text else head
    if with_task and event.task_id:
        return f"{event.task_id}  {indent(line, len(event.task_id) + 16)}"
    return indent(line, 14)


def event_json(event: StreamEvent) -> str:
    """One event as a JSON line: ``{"id", "synthetic"?, "result": StreamResponse}``."""
    record = {"id": event.id}
    if event.synthetic:
        record["synthetic"] = True
    record["result"] = event.as_result()
    return dumps(record)


def prompt_of(task: dict) -> str:
    return artifact_text(task, "prompt") or ""


def _usage_part(part) -> bool:
    return isinstance(part, dict) and isinstance(part.get("data"), dict) \
        and set(part["data"]) == {"usage"} and isinstance(part["data"]["usage"], dict)


def usage_text(usage: dict) -> str:
    """A hub's run usage as a person reads it: ``12 input (4 cached), 30 output tokens;
    0.5 credits; model m``."""
    def number(name):
        value = usage.get(name)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0

    cached = f" ({number('cached_tokens')} cached)" if number("cached_tokens") else ""
    text = (f"{number('input_tokens')} input{cached}, {number('output_tokens')} output "
            f"tokens; {number('credits')} credits")
    if usage.get("pricing_status") == "unpriced":
        text += " (unpriced)"
    if isinstance(usage.get("model"), str):
        text += f"; model {usage['model']}"
    return text


def split_usage(parts) -> tuple[str, str | None]:
    """``(text, usage)``: the parts' text without a hub's usage part, and that part as
    ``usage_text`` (None when there is none)."""
    if not isinstance(parts, list):
        return "", None
    usage = [p for p in parts if _usage_part(p)]
    if not usage:
        return parts_text(parts), None
    return parts_text([p for p in parts if not _usage_part(p)]), \
        usage_text(usage[-1]["data"]["usage"])


def response_of(task: dict) -> str | None:
    """What a completed task answered: the door's ``response`` artifact, the hub's
    ``answer``, else every artifact's text (another server's), else its status's text."""
    text = artifact_text(task, "response")
    if text is not None:
        return text
    for artifact in task.get("artifacts") or []:
        if isinstance(artifact, dict) and artifact.get("artifactId") == "answer":
            # NOTE: the hub's answer ends with a data part {"usage": …}: not the answer.
            return parts_text([p for p in artifact.get("parts") or []
                               if not _usage_part(p)])
    artifacts = task.get("artifacts") or []
    if artifacts:
        return "\n".join(parts_text(a.get("parts")) for a in artifacts if isinstance(a, dict))
    return status_text(task.get("status")) or None
