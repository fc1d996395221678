"""A GetTask of a large task quotes the memory store's one copy of it as the client reads.

Its answer was made of a copy of the task's kept wire form (a ``RawJSON``, a str, copies
the text it is made of), then that copy around its envelope, then its bytes: 20 GetTasks of
a 60 MiB task whose clients did not read took the worker from 225 MB to 1.4 GB for the
write deadline. The answer is now encoded a piece at a time from the kept text (225 MB to
230 MB). On Redis each GetTask reads a copy of its own from Redis still.
"""
from __future__ import annotations

import json

import pytest

from tests.hub.conftest import HubClient
from tests.hub.held_util import opened_holding
from tests.hub.retention_util import ended

SIZE = 8 * 1024 * 1024
READERS = 4


@pytest.mark.one_store
def test_get_tasks_of_a_large_task_hold_no_copy_of_it_each(hub):
    task = ended(hub.stores, size=SIZE)
    rpc = HubClient(hub)
    responses, chunks, first, held = opened_holding(
        lambda: rpc.call("GetTask", {"id": task.id}, buffered=False), READERS)
    for response in responses[1:]:
        response.close()
    assert held < SIZE, (held, SIZE)
    body = first[0] + b"".join(chunks[0])
    responses[0].close()
    assert int(responses[0].headers["Content-Length"]) == len(body)
    answer = json.loads(body)
    assert answer["id"] == 1 and answer["result"]["id"] == task.id
    assert answer["result"]["history"][0]["parts"][0]["text"] == "x" * SIZE


def test_a_large_task_reads_the_same_whole_or_in_pieces(hub):
    task = ended(hub.stores, size=SIZE)
    rpc = HubClient(hub)
    whole = rpc.result("GetTask", {"id": task.id})
    assert whole["id"] == task.id and len(whole["history"][0]["parts"][0]["text"]) == SIZE
    trimmed = rpc.result("GetTask", {"id": task.id, "historyLength": 1})
    assert trimmed == whole
