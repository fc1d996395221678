"""wire/params.py on its own: ListTasks' schema and a task's id, read without a door."""
from __future__ import annotations

import pytest
from marshmallow.experimental.context import Context

from murmur_wsgi.errors import InvalidParamsError
from murmur_wsgi.rfc3339 import rfc3339_us
from murmur_wsgi.wire import params as wire_params
from murmur_wsgi.wire.params import (FIRST_PAGE, ListTasksParams, TaskIdParams, read_list_tasks,
                                     read_task_id)

TOKENS = {"tok5": 5}


def read(params: dict) -> ListTasksParams:
    return read_list_tasks(params, TOKENS.get)


def refusal(params: dict) -> str:
    with pytest.raises(InvalidParamsError) as caught:
        read(params)
    return caught.value.message


def test_no_field_reads_as_the_first_page():
    assert read({}) == FIRST_PAGE
    assert read({"historyLength": "x", "tenant": ""}) == FIRST_PAGE
    # The fast path answers what the schema answers.
    with Context({"decode_token": TOKENS.get}):
        assert wire_params._LIST_TASKS.load({}) == FIRST_PAGE


def test_every_field_read():
    got = read({"contextId": "ctx_1", "status": "TASK_STATE_COMPLETED", "pageSize": 500,
                "pageToken": "tok5", "statusTimestampAfter": "2026-10-13T09:00:00.5Z",
                "includeArtifacts": True})
    assert got == ListTasksParams("ctx_1", "TASK_STATE_COMPLETED", 100, 5,
                                  1_791_882_000_500_000, True)


@pytest.mark.parametrize("params, expected", [
    pytest.param({"contextId": ""}, FIRST_PAGE, id="empty-context-filters-nothing"),
    pytest.param({"status": "TASK_STATE_UNSPECIFIED"}, FIRST_PAGE, id="unspecified"),
    pytest.param({"pageToken": ""}, FIRST_PAGE, id="empty-token"),
    pytest.param({"statusTimestampAfter": None}, FIRST_PAGE, id="null-cutoff"),
])
def test_unset_values(params, expected):
    assert read(params) == expected


@pytest.mark.parametrize("params, message", [
    pytest.param({"contextId": None}, "Invalid params: contextId must be a string", id="ctx-null"),
    pytest.param({"status": None}, "Invalid params: status must be a TASK_STATE_* name",
                 id="status-null"),
    pytest.param({"pageSize": None}, "Invalid params: pageSize must be an integer from 1",
                 id="size-null"),
    pytest.param({"pageToken": None}, wire_params.TOKEN_MESSAGE, id="token-null"),
    pytest.param({"pageToken": "tok6"}, wire_params.TOKEN_MESSAGE, id="token-unknown"),
    pytest.param({"includeArtifacts": None}, "Invalid params: includeArtifacts must be a boolean",
                 id="include-null"),
    pytest.param({"includeArtifacts": 1, "pageToken": "bad", "statusTimestampAfter": 3},
                 wire_params.TOKEN_MESSAGE, id="token-before-cutoff"),
    pytest.param({"includeArtifacts": 1, "statusTimestampAfter": "2026-02-30T00:00:00Z"},
                 wire_params.TIMESTAMP_MESSAGE, id="cutoff-before-include"),
])
def test_refusals_in_order(params, message):
    assert refusal(params) == message


@pytest.mark.parametrize("value", ["tsk_1"])
def test_task_id(value):
    assert read_task_id({"id": value}, "GetTask") == TaskIdParams(value)


@pytest.mark.parametrize("params", [{}, {"id": ""}, {"id": None}, {"id": 3}, {"id": ["x"]}])
def test_task_id_refused(params):
    with pytest.raises(InvalidParamsError) as caught:
        read_task_id(params, "CancelTask")
    assert caught.value.message == "CancelTask requires an id"


@pytest.mark.parametrize("value", [
    # NOTE: before, each was read: "+00:60" as +01:00, "+00:99" as +01:39, and digits of
    # another script (Arabic-Indic here) in the fraction as their values.
    "2026-10-13T09:00:00+00:60", "2026-10-13T09:00:00-05:99",
    "2026-10-13T09:00:00.\u0661\u0662\u0663Z", "2026-10-13T09:00:00+0\u0661:00",
])
def test_a_cutoff_outside_rfc3339s_grammar_is_refused(value):
    """RFC 3339: an offset's minute is 00-59, and every digit is an ASCII DIGIT."""
    assert rfc3339_us(value) is None
    assert refusal({"statusTimestampAfter": value}) == wire_params.TIMESTAMP_MESSAGE


@pytest.mark.parametrize("value, micros", [
    ("2026-10-13T09:00:00+23:59", 1_791_795_660_000_000),
    ("2026-10-13T09:00:00-00:00", 1_791_882_000_000_000),
    ("2026-10-13t09:00:00.123456789z", 1_791_882_000_123_457),
])
def test_a_cutoff_within_rfc3339s_grammar_is_read(value, micros):
    assert rfc3339_us(value) == micros
