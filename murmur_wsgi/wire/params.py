"""Method params other than a message's: a task's id, and ListTasks' filters and page.

Each reader returns a typed value the handler takes; a handler never reads the
raw params. ListTasks' rules are one schema whose fields are declared in the
spec's order: the first rule a request breaks answers. The hub's ListTasks is
a variant of the door's (``HubListTasksSchema``): the same fields, some read
more leniently (null as absent), and ``historyLength``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from marshmallow import fields, post_load, validate
from marshmallow.experimental.context import Context

from murmur_wsgi.errors import InvalidParamsError
from murmur_wsgi.rfc3339 import rfc3339_us
from murmur_wsgi.wire.task import ALL_STATES
from murmur_wsgi.wire.base import StrictBoolean, StrictInteger, StrictString, WireSchema, load

logger = logging.getLogger(__name__)

PAGE_DEFAULT = 50
PAGE_MAX = 100
UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
TIMESTAMP_MESSAGE = ("statusTimestampAfter must be an RFC 3339 timestamp, such as "
                     "2026-10-13T09:00:00Z")
TOKEN_MESSAGE = "Invalid params: pageToken is not a nextPageToken this door answered"


# --- GetTask, CancelTask, SubscribeToTask ---------------------------------------------


@dataclass(slots=True)
class TaskIdParams:
    """params of a method that names one task (``historyLength`` is ignored)."""

    id: str


def read_task_id(params: dict, method: str) -> TaskIdParams:
    """params.id, a non-empty string, or -32602 '<Method> requires an id'.

    PERF: one rule, read without a schema: GetTask is the door's hot path, and a
    marshmallow load would cost it a third of its time.
    """
    return TaskIdParams(task_id_of(params, method))


def task_id_of(params: dict, method: str) -> str:
    """``read_task_id``'s id alone (PERF: a hot path's, without the params object)."""
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParamsError(f"{method} requires an id")
    return task_id


# --- ListTasks ---------------------------------------------------------------------------


@dataclass(slots=True)
class ListTasksParams:
    """ListTasks' params, read: the filters, the page, and what each task carries."""

    context_id: str | None              # None: every context ("" filters nothing)
    state: str | None                   # None: every state (TASK_STATE_UNSPECIFIED)
    page_size: int                      # 1..PAGE_MAX (a larger ask is served PAGE_MAX)
    after: int | None                   # the position pageToken names; None: the first page
    cutoff_us: int | None               # statusTimestampAfter, epoch microseconds
    include_artifacts: bool


def read_timestamp_us(value) -> int:
    """statusTimestampAfter as epoch microseconds, or -32602 naming the format."""
    found = rfc3339_us(value)
    if found is None:
        raise InvalidParamsError(TIMESTAMP_MESSAGE)
    return found


class _Timestamp(StrictString):
    """An RFC 3339 timestamp with a zone, read as epoch microseconds."""

    def _deserialize(self, value, attr, data, **kwargs):
        found = rfc3339_us(value)
        if found is None:
            raise self.make_error("invalid")
        return found


class _PageToken(StrictString):
    """A nextPageToken this door answered, read as its position ("" names none).

    The door's decoder (``decode_token(token) -> int | None``) comes in the
    load's ``Context``: a token names a position of one session's order.
    """

    def _deserialize(self, value, attr, data, **kwargs):
        if value == "":
            return None
        if not isinstance(value, str):
            raise self.make_error("invalid")
        after = Context.get()["decode_token"](value)
        if after is None:
            raise self.make_error("invalid")
        return after


class ListTasksSchema(WireSchema):
    """ListTasks' params in the spec's order: the first refused one answers."""

    context_id = StrictString("Invalid params: contextId must be a string",
                              data_key="contextId", load_default="")
    status = StrictString("Invalid params: status must be a TASK_STATE_* name",
                          data_key="status", load_default=UNSPECIFIED,
                          validate=validate.OneOf(
                              frozenset(ALL_STATES | {UNSPECIFIED}),
                              error="Invalid params: status must be a TASK_STATE_* name"))
    page_size = StrictInteger("Invalid params: pageSize must be an integer from 1",
                              data_key="pageSize", load_default=PAGE_DEFAULT,
                              validate=validate.Range(
                                  min=1, error="Invalid params: pageSize must be an integer "
                                               "from 1"))
    after = _PageToken(TOKEN_MESSAGE, data_key="pageToken", load_default="", allow_none=False)
    cutoff_us = _Timestamp(TIMESTAMP_MESSAGE, data_key="statusTimestampAfter",
                           load_default=None, allow_none=True)
    include_artifacts = StrictBoolean("Invalid params: includeArtifacts must be a boolean",
                                      data_key="includeArtifacts", load_default=False)

    @post_load
    def _typed(self, data: dict, **kwargs) -> ListTasksParams:
        state = data["status"]
        after = data["after"]
        return ListTasksParams(context_id=data["context_id"] or None,
                               state=None if state == UNSPECIFIED else state,
                               page_size=min(data["page_size"], PAGE_MAX),
                               after=None if after == "" else after,
                               cutoff_us=data["cutoff_us"],
                               include_artifacts=data["include_artifacts"])


_LIST_TASKS = ListTasksSchema()
_LIST_KEYS = tuple(field.data_key for field in _LIST_TASKS.fields.values())
FIRST_PAGE = ListTasksParams(None, None, PAGE_DEFAULT, None, None, False)


def read_list_tasks(params: dict, decode_token: Callable[[str], int | None]) -> ListTasksParams:
    """Read ListTasks' params, or raise the first refusal (-32602)."""
    # PERF: params naming none of the fields (``{}``, the usual first call) read as the
    # defaults without a load, which costs ~10 µs.
    if not any(key in params for key in _LIST_KEYS):
        return FIRST_PAGE
    with Context({"decode_token": decode_token}):
        return load(_LIST_TASKS, params)


# --- the hub's ListTasks, and historyLength --------------------------------------------

HUB_PAGE_MESSAGE = f"Invalid params: pageSize must be from 1 to {PAGE_MAX}"
LIST_HISTORY_DEFAULT = 100


def history_length_field(where: str) -> StrictInteger:
    """``historyLength`` (the hub's): a whole number, 0 or more; null or absent reads None."""
    message = f"Invalid params: {where} must be a whole number, 0 or more"
    return StrictInteger(message, data_key="historyLength", load_default=None, allow_none=True,
                         validate=validate.Range(min=0, error=message))


class HistoryLengthSchema(WireSchema):
    """The hub's GetTask: params.historyLength, which trims the task's history."""

    history_length = history_length_field("historyLength")


_HISTORY = HistoryLengthSchema()


def read_history_length(params: dict) -> int | None:
    """params.historyLength (the hub's GetTask), None when absent or null."""
    if "historyLength" not in params:
        return None
    return load(_HISTORY, params)["history_length"]


@dataclass(slots=True)
class HubListTasksParams:
    """The hub's ListTasks params, read; the page token is the store's to decode."""

    context_id: str | None
    state: str | None
    page_size: int                      # 1..PAGE_MAX (a larger ask is refused)
    token: str | None                   # None: the first page
    cutoff_us: int | None
    include_artifacts: bool
    history_length: int                 # LIST_HISTORY_DEFAULT when not given


class _TokenText(fields.Field):
    """The hub's pageToken: a string; "" (like null) names no page."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str):
            raise self.make_error("invalid")
        return value or None


class HubListTasksSchema(ListTasksSchema):
    """The hub's ListTasks: the door's fields in the door's order, then historyLength.

    pageSize, pageToken and includeArtifacts read null as absent; a pageSize
    over PAGE_MAX is refused; the token is checked by the store after the load.
    """

    page_size = StrictInteger(HUB_PAGE_MESSAGE, data_key="pageSize", load_default=PAGE_DEFAULT,
                              allow_none=True,
                              validate=validate.Range(min=1, max=PAGE_MAX,
                                                      error=HUB_PAGE_MESSAGE))
    after = _TokenText(data_key="pageToken", load_default=None, allow_none=True,
                       error_messages={"invalid": "Invalid params: pageToken must be a string"})
    include_artifacts = StrictBoolean("Invalid params: includeArtifacts must be a boolean",
                                      data_key="includeArtifacts", load_default=False,
                                      allow_none=True)
    history_length = history_length_field("historyLength")

    @post_load
    def _typed(self, data: dict, **kwargs) -> HubListTasksParams:
        state = data["status"]
        length = data["history_length"]
        return HubListTasksParams(
            context_id=data["context_id"] or None,
            state=None if state == UNSPECIFIED else state,
            page_size=PAGE_DEFAULT if data["page_size"] is None else data["page_size"],
            token=data["after"], cutoff_us=data["cutoff_us"],
            include_artifacts=bool(data["include_artifacts"]),
            history_length=LIST_HISTORY_DEFAULT if length is None else length)


_HUB_LIST_TASKS = HubListTasksSchema()
_HUB_LIST_KEYS = tuple(field.data_key for field in _HUB_LIST_TASKS.fields.values())


def read_hub_list_tasks(params: dict) -> HubListTasksParams:
    """Read the hub's ListTasks params, or raise the first refusal (-32602)."""
    if not any(key in params for key in _HUB_LIST_KEYS):        # PERF: as the door's
        return HubListTasksParams(None, None, PAGE_DEFAULT, None, None, False,
                                  LIST_HISTORY_DEFAULT)
    return load(_HUB_LIST_TASKS, params)
