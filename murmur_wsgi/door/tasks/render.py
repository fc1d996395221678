"""What the agent receives: a message's text, its referenced tasks, in the untrusted fence."""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

# strip_untrusted_fence: also importable from here, where docs/agents.md first named it.
from murmur_wsgi.agents.fence import neutralise_markers, wrap_untrusted
from murmur_wsgi.agents.fence import strip_untrusted_fence  # noqa: F401
# data_block, fence, label_value, pretty_json: the fenced blocks, shared with the hub.
from murmur_wsgi.agents.blocks import (OverBudget, data_block, fence,  # noqa: F401
                                       label_value, parts_text, pretty_json)
from murmur_wsgi.errors import InvalidParamsError
from murmur_wsgi.door.tasks.record import COMPLETED, WORDS

if TYPE_CHECKING:
    from murmur_wsgi.door.tasks.record import TaskRecord
    from murmur_wsgi.wire.message import IncomingMessage

logger = logging.getLogger(__name__)

LIVE = frozenset({WORDS[s] for s in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING",
                                     "TASK_STATE_INPUT_REQUIRED")})
NOT_HELD = "not a task this capsule holds"
REFERENCES_HEADER = "Referenced tasks:"
REFERENCE_BYTES = 64 * 1024         # limits.reference_bytes: a response quoted up to this
ECHO_CHECKS = 16                    # candidate echoes compared per quoted response, at most
DATA_TEXT_BYTES = 16 * 1024 ** 2    # limits.data_text_bytes: a message's data parts, rendered


@dataclass(frozen=True, slots=True)
class RefView:
    """A referenced task as it stood when the message arrived."""

    state: str                          # murmur's word: working, completed, failed, …
    status_text: str | None = None      # the final status message's text
    response: str | None = None         # the response artifact's text, on a completed task
    echoes: tuple = ()                  # the marks of the block the task was given (echo_marks)

    @classmethod
    def from_record(cls, record: TaskRecord) -> RefView:
        """Build the view of a task record; read it under the store's lock."""
        response = record.response if record.state == COMPLETED else None
        return cls(WORDS.get(record.state, record.state), record.status_text, response,
                   record.echoes)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def echo_marks(block: str) -> tuple:
    """How a "Referenced tasks" block may come back in the agent's response: (length, digest)
    of the block as written, and as read out of the untrusted fence (markers neutralised).

    A task keeps these marks, not the block: a later reference finds the block in the
    task's response by them and leaves it out (``without_echoes``).
    """
    return tuple((len(form), _digest(form)) for form in dict.fromkeys(
        (block, neutralise_markers(block))))


def without_echoes(response: str, echoes: tuple) -> tuple[str, bool]:
    """``response`` without the blocks its task was given; and whether one was left out."""
    if not echoes or REFERENCES_HEADER not in response:
        return response, False
    kept, pos, checks = [], 0, 0
    at = response.find(REFERENCES_HEADER)
    while at != -1 and checks < ECHO_CHECKS:
        for length, digest in echoes:
            checks += 1
            if _digest(response[at:at + length]) == digest:
                start = at - 2 if at - 2 >= pos and response.startswith("\n\n", at - 2) else at
                kept.append(response[pos:start])
                pos = at + length
                break
        at = response.find(REFERENCES_HEADER, max(pos, at + 1))
    if not kept:
        return response, False
    kept.append(response[pos:])
    return "".join(kept), True


def cut_utf8(text: str, limit: int) -> tuple[str, int | None]:
    """``text`` cut to at most ``limit`` UTF-8 bytes on a character boundary.

    Returns the text kept and, when it was cut, the UTF-8 length of the whole.
    """
    if len(text) * 4 <= limit:                  # PERF: no character is more than 4 bytes
        return text, None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, None
    end = limit
    while end > 0 and data[end] & 0xC0 == 0x80:   # a continuation byte: back to its start
        end -= 1
    return data[:end].decode("utf-8", "surrogatepass"), len(data)


def one_line(text: str) -> str:
    """Put ``text`` on one line: its lines, stripped, joined by a space."""
    if "\n" not in text and "\r" not in text and text.isprintable():
        return text.strip()
    return " ".join(filter(None, (line.strip() for line in text.splitlines())))


def quoted_response(view: RefView, limit: int) -> str:
    """The response fence of a completed task: its own text, cut to ``limit`` bytes.

    The label says what the door left out: ``references=omitted`` when the
    response repeated the block the task was given, ``shown-bytes=<n>
    total-bytes=<m>`` when it was cut. The fence is chosen after the cut.
    """
    text, omitted = without_echoes(view.response, view.echoes)
    text, total = cut_utf8(text, limit)
    label = "response"
    if omitted:
        label += " references=omitted"
    if total is not None:
        label += f" shown-bytes={len(text.encode('utf-8', 'surrogatepass'))} total-bytes={total}"
    return fence(label, text)


def reference_line(task_id: str, view: RefView | None, limit: int = REFERENCE_BYTES) -> str:
    """Render one referenced task's line, with its response fence when it has one."""
    shown = one_line(task_id)
    if view is None:
        return f"- {shown}: {NOT_HELD}"
    if view.state in LIVE:
        return f"- {shown}: {view.state}"
    if view.state == WORDS[COMPLETED] and view.response is not None:
        return f"- {shown}: {view.state}\n" + quoted_response(view, limit)
    text, total = cut_utf8(view.status_text or "", limit)     # an agent's words: bounded too
    message = one_line(text) if text else ""
    if message and total is not None:
        return f"- {shown}: {view.state}: {message} …[cut: {total} bytes]"
    if message:
        return f"- {shown}: {view.state}: {message}"
    return f"- {shown}: {view.state}"


def references_block(references: list[tuple[str, RefView | None]],
                     limit: int = REFERENCE_BYTES) -> str:
    """Render the "Referenced tasks:" block, one line per task in the given order."""
    return "\n".join([REFERENCES_HEADER] + [reference_line(tid, view, limit)
                                            for tid, view in references])


def agent_text(message: IncomingMessage, references: list[tuple[str, RefView | None]],
               untrusted: bool, origin: str | None, reference_bytes: int = REFERENCE_BYTES,
               data_bytes: int | None = None) -> str:
    """Render the text the agent receives for ``message``.

    Args:
        message: the message as ``read_message`` read it. Its images are not
            in the text; they are delivered after it.
        references: each referenced id, in the message's order, with its
            view, or None for a task this capsule does not hold or the
            sender does not see.
        untrusted: the task's trust class is untrusted: wrap it all in the fence.
        origin: the task's origin; None (a plain A2A client) reads as event.
        reference_bytes: ``limits.reference_bytes``, each quoted response's bound.
        data_bytes: ``limits.data_text_bytes``, the bound of the data parts'
            rendered text (None: unbounded).

    Raises:
        InvalidParamsError: the data parts render to more than ``data_bytes``.
    """
    return start_text(message, references, untrusted, origin, reference_bytes, data_bytes)[0]


def start_text(message: IncomingMessage, references: list[tuple[str, RefView | None]],
               untrusted: bool, origin: str | None, reference_bytes: int = REFERENCE_BYTES,
               data_bytes: int | None = None) -> tuple[str, tuple]:
    """``agent_text``, and the ``echo_marks`` of its references block (() without one)."""
    try:
        text = parts_text(message.parts, data_bytes)
    except OverBudget as over:
        raise InvalidParamsError(
            f"Invalid params: message.parts[{over.index}] is data that, pretty-printed for the "
            f"agent, makes the message's data parts more than limits.data_text_bytes "
            f"({data_bytes}) bytes") from None
    echoes = ()
    if references:
        block = references_block(references, reference_bytes)
        echoes = echo_marks(block)
        # NOTE: a message of images only has no parts text; the block then stands alone.
        text = f"{text}\n\n{block}" if text else block
    if untrusted:
        text = wrap_untrusted(f"task:{origin or 'event'}", text)
    return text, echoes
