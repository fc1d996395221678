"""The client's bound on the JSON values of one answer, or of one stream's event.

A parse builds a Python object for every value: 64 MiB of ``[[],[],…]`` made about
1.4 GB of them. An answer or an event of more than ``max_answer_values`` values is a
``ProtocolError`` before it is parsed; what is checked is the memory the refusal takes
(tracemalloc's peak), against what parsing it would take.
"""
from __future__ import annotations

import json
import tracemalloc

import pytest

from murmur_wsgi.cli import main
from murmur_wsgi.client import A2AClient, ProtocolError
from murmur_wsgi.client import body
from murmur_wsgi.wire.json_counts import count_values
from tests.shared.hostile_server import Hostile, answer, card
from tests.shared.test_client_hostile import cli_env, stream_door  # noqa: F401 - a fixture

WAIT = 10.0
MAX_ANSWER_VALUES = 10_000_000      # A2AClient's max_answer_values
SERVERS_MAX_VALUES = 1_000_000      # the servers' limits.max_json_values on a request
# An empty list is 56 bytes (64 with its GC header) once parsed, for 3 bytes of JSON.
PARSED_BYTES_PER_EMPTY_LIST = 56


def empty_lists(count: int) -> bytes:
    """``[[],[],…]``: ``count`` empty lists, ``count + 1`` values, 3 bytes each."""
    return b"[" + b"[]," * (count - 1) + b"[]]"


def rpc(result: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":1,"result":' + result + b"}"


# Past the default bound by one: about 30 MB, the densest memory per byte JSON makes.
BOMB = empty_lists(MAX_ANSWER_VALUES)
SHAPES = {"a-list-of-lists": BOMB, "an-object-holding-one": b'{"a":' + BOMB + b"}"}


def rpc_door(result: bytes) -> Hostile:
    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
        else:
            answer(conn, "200 OK", rpc(result))
    return Hostile(handler)


def peak_of(call) -> tuple[int, object]:
    """``call()``'s peak of traced memory, and what it returned or raised."""
    tracemalloc.start()
    try:
        try:
            outcome = call()
        except Exception as ex:     # noqa: BLE001 - handed to the test
            outcome = ex
        return tracemalloc.get_traced_memory()[1], outcome
    finally:
        tracemalloc.stop()


def parse_would_take(body: bytes) -> int:
    return count_values(body) * PARSED_BYTES_PER_EMPTY_LIST


@pytest.mark.parametrize("result", list(SHAPES.values()), ids=list(SHAPES))
def test_an_answer_of_too_many_values_is_refused_unparsed(result):
    with rpc_door(result) as door, A2AClient(door.url, timeout=WAIT) as client:
        client.card()
        peak, raised = peak_of(lambda: client.call("GetTask", {"id": "t"}))
    assert isinstance(raised, ProtocolError), raised
    assert f"answered more than {MAX_ANSWER_VALUES} JSON values (max_answer_values)" in str(
        raised)
    assert peak < 6 * len(result) < parse_would_take(result) / 3


def test_an_event_of_too_many_values_is_refused_unparsed():
    event = b"data: " + rpc(b'{"task":{"id":"t","history":' + BOMB + b"}}") + b"\n\n"

    def write(conn, server):
        conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event))
    with stream_door(write) as door, A2AClient(door.url, timeout=WAIT,
                                              stream_timeout=WAIT) as client:
        stream = client.subscribe("t")
        peak, raised = peak_of(lambda: next(stream))
        stream.close()
    assert isinstance(raised, ProtocolError), raised
    assert f"wrote an event of more than {MAX_ANSWER_VALUES} JSON values (max_answer_values)" \
        in str(raised)
    assert peak < 6 * len(event) < parse_would_take(BOMB) / 3


def test_the_command_says_so_in_one_line(cli_env, capsys):  # noqa: F811 - the fixture
    with rpc_door(SHAPES["an-object-holding-one"]) as door:
        status = main(["get", "t", "--url", door.url, "--timeout", str(WAIT)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"more than {MAX_ANSWER_VALUES} JSON values (max_answer_values)" in err


def large_task(number: int) -> dict:
    """A task of ten turns, each a message of 10 texts of 1 KB and 10 data parts of 100
    numbers, and an artifact of as many."""
    parts = [{"text": f"{i} " + "x" * 1024} for i in range(10)] + [
        {"data": {"row": i, "values": list(range(100))}} for i in range(10)]
    message = {"messageId": f"m-{number}", "role": "ROLE_USER", "parts": parts,
               "metadata": {"turn": number}}
    return {"id": f"tsk_{number}", "contextId": "ctx_1",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00Z"},
            "history": [message] * 10,
            "artifacts": [{"artifactId": "answer", "parts": parts}]}


def test_a_listtasks_page_of_a_hundred_large_tasks_parses():
    page = {"tasks": [large_task(n) for n in range(100)], "nextPageToken": "",
            "pageSize": 100, "totalSize": 100}
    result = json.dumps(page, separators=(",", ":")).encode()
    assert count_values(result) > SERVERS_MAX_VALUES      # more than one request may hold
    with rpc_door(result) as door, A2AClient(door.url, timeout=WAIT) as client:
        assert client.list_page() == page


def test_loads_counts_only_a_text_long_enough_to_pass_its_bound():
    loads, TooManyValues = body.loads, body.TooManyValues
    assert loads(b"[[],[]]", max_values=7) == [[], []]
    assert loads("[[],[]]", max_values=3) == [[], []]
    with pytest.raises(TooManyValues, match="more than 2 JSON values"):
        loads("[[],[]]", max_values=2)
    with pytest.raises(TooManyValues):
        loads(empty_lists(1000), max_values=1000)
    assert len(loads(empty_lists(1000), max_values=1001)) == 1000
    assert loads(empty_lists(1000)) == [[]] * 1000          # None: any number
