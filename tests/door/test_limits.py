"""limits.*: what one request may ask of the door, refused before the work it bounds."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from werkzeug.test import EnvironBuilder, run_wsgi_app

from bench.parse import accept, data_deep, least_cpu
from murmur_wsgi.wire import json_counts
from murmur_wsgi.door.tasks import render
from tests.conftest import V1, Rpc, make_door

SMALL = {"limits": {"max_body_bytes": 4096},
         "context": {"images": {"max_bytes": 1024, "max_per_turn": 2}}}
TOO_LARGE = [("jsonrpc", "2.0"), ("id", None),
             ("error", [("code", -32600), ("message", "Request payload validation error")])]


class CountingInput:
    """A request body of ``size`` bytes (``None``: endless) that counts what is read of it."""

    def __init__(self, size: int | None):
        self.size = size
        self.taken = 0

    def read(self, n: int = -1) -> bytes:
        left = (1 << 62 if self.size is None else self.size) - self.taken
        n = left if n is None or n < 0 else min(n, left)
        if n > 1 << 30:
            raise AssertionError("the door read a body to its end")
        self.taken += n
        return b" " * n


def post_stream(door, stream, content_length: int | None):
    """POST / with ``stream`` as wsgi.input; Content-Length as given, else chunked."""
    environ = EnvironBuilder(path="/", method="POST", headers=V1,
                             content_type="application/json").get_environ()
    environ["wsgi.input"] = stream
    if content_length is None:
        environ.pop("CONTENT_LENGTH", None)
        environ["wsgi.input_terminated"] = True
    else:
        environ["CONTENT_LENGTH"] = str(content_length)
    body, status, headers = run_wsgi_app(door, environ)
    return status, dict(headers), b"".join(body)


def assert_too_large(status, headers, data):
    assert status == "413 Content Too Large"
    assert headers["Content-Type"] == "application/json"
    assert headers["Content-Length"] == str(len(data))
    assert json.loads(data, object_pairs_hook=list) == TOO_LARGE


# --- limits.max_body_bytes -------------------------------------------------------------


def test_declared_body_over_the_limit_is_413_before_a_byte_is_read():
    stream = CountingInput(None)
    assert_too_large(*post_stream(make_door(), stream, 1 << 40))       # a TiB declared
    assert stream.taken == 0


def test_declared_body_one_over_a_small_limit_is_413_unread():
    stream = CountingInput(4097)
    assert_too_large(*post_stream(make_door(**SMALL), stream, 4097))
    assert stream.taken == 0


def test_undeclared_body_is_refused_as_the_read_passes_the_limit():
    stream = CountingInput(None)                       # chunked, and it never ends
    assert_too_large(*post_stream(make_door(**SMALL), stream, None))
    assert stream.taken == 4097


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_at_the_limit_is_read_whole_not_cut(chunked):
    request = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "GetTask",
                          "params": {"id": "tsk_none"}})
    body = request + " " * (4096 - len(request))
    environ = EnvironBuilder(path="/", method="POST", headers=V1, data=body,
                             content_type="application/json").get_environ()
    if chunked:
        environ.pop("CONTENT_LENGTH")
        environ["wsgi.input_terminated"] = True
    out, status, _ = run_wsgi_app(make_door(**SMALL), environ)
    assert status == "200 OK"
    assert json.loads(b"".join(out))["error"]["code"] == -32001      # read whole, not cut


def test_the_largest_image_payload_fits_the_default_body():
    door = make_door()
    images = door.manifest.context["images"]
    payload = -(-images["max_bytes"] // 3) * 4 * images["max_per_turn"]
    assert payload + 1024 ** 2 < door.manifest.limits["max_body_bytes"] == 64 * 1024 ** 2


# --- limits.max_parts ------------------------------------------------------------------


def send(parts, **message):
    return {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": parts, **message},
            "configuration": {"returnImmediately": True}}


def test_more_parts_than_the_limit_is_refused_before_any_part_is_read():
    rpc = Rpc(make_door())
    # Part 0 is not even an object: the count answers first.
    error = rpc.error("SendMessage", send([5] + [{"text": "x"}] * 1_000))
    assert error == {"code": -32602, "message": "Invalid params: message.parts holds 1001 "
                                                "parts, more than limits.max_parts (1000)"}


def test_as_many_parts_as_the_limit_are_read():
    rpc = Rpc(make_door(limits={"max_parts": 3}))
    assert rpc.result("SendMessage", send([{"text": "x"}] * 3))["task"]["id"].startswith("tsk_")
    assert rpc.error("SendMessage", send([{"text": "x"}] * 4))["message"] == (
        "Invalid params: message.parts holds 4 parts, more than limits.max_parts (3)")


# --- limits.max_json_depth -------------------------------------------------------------

PARSE_ERROR = {"jsonrpc": "2.0", "id": None,
               "error": {"code": -32700, "message": "Invalid JSON payload"}}


def nested_request(depth: int) -> bytes:
    """A SendMessage whose body nests exactly ``depth`` deep (its data part holds the rest)."""
    inner = depth - 5                 # envelope, params, message, parts, a part: 5
    data = "[" * inner + "]" * inner if inner else "0"
    return (b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":'
            b'{"messageId":"m","role":"ROLE_USER","parts":[{"data":' + data.encode()
            + b'}]},"configuration":{"returnImmediately":true}}}')


def test_a_body_as_deep_as_the_limit_is_read():
    payload = Rpc(make_door()).post(nested_request(64)).get_json()
    assert payload["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"


def test_a_body_one_level_deeper_than_the_limit_is_a_parse_error():
    response = Rpc(make_door()).post(nested_request(65))
    assert response.status_code == 200
    assert response.get_json() == PARSE_ERROR


@pytest.mark.parametrize("opening, closing", [(b"[", b"]"), (b'{"a":', b"}")],
                         ids=["arrays", "objects"])
def test_a_body_nested_100_000_deep_is_a_parse_error_at_once(opening, closing):
    body = opening * 100_000 + b"0" + closing * 100_000
    response = Rpc(make_door()).post(body)
    assert response.status_code == 200
    assert response.get_json() == PARSE_ERROR


def test_the_depth_limit_is_the_manifests():
    rpc = Rpc(make_door(limits={"max_json_depth": 8}))
    assert "result" in rpc.post(nested_request(8)).get_json()
    assert rpc.post(nested_request(9)).get_json() == PARSE_ERROR


def depth_of(value) -> int:
    """The nesting depth of a parsed JSON value, objects and arrays counted (a scalar is 0)."""
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


TRICKY = st.text(alphabet='[]{}"\\\\ab\u00e9', max_size=6)
JSON = st.recursive(st.none() | st.integers() | TRICKY,
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(TRICKY, inner, max_size=3), max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(JSON, st.integers(min_value=1, max_value=12), st.booleans())
def test_too_deep_reads_the_depth_of_any_json(value, limit, ascii_only):
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert json_counts.too_deep(body, limit) == (depth_of(value) > limit)


# --- limits.max_json_values -------------------------------------------------------------


def values_of(value) -> int:
    """The values of a parsed JSON value: itself and every value it holds (keys are not)."""
    if isinstance(value, dict):
        return 1 + sum(map(values_of, value.values()))
    if isinstance(value, list):
        return 1 + sum(map(values_of, value))
    return 1


def request_of_values(count: int) -> bytes:
    """A SendMessage of exactly ``count`` values (at least 13): its data part is a list of zeros."""
    zeros = ",".join(["0"] * (count - 13))
    body = (b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":'
            b'{"messageId":"m","role":"ROLE_USER","parts":[{"data":[' + zeros.encode()
            + b']}]},"configuration":{"returnImmediately":true}}}')
    assert values_of(json.loads(body)) == count
    return body


def test_a_body_of_as_many_values_as_the_limit_is_read():
    rpc = Rpc(make_door(limits={"max_json_values": 100}))
    assert rpc.post(request_of_values(100)).get_json()["result"]["task"]["id"].startswith("tsk_")


def test_a_body_of_one_value_more_than_the_limit_is_a_parse_error():
    response = Rpc(make_door(limits={"max_json_values": 100})).post(request_of_values(101))
    assert response.status_code == 200
    assert response.get_json() == PARSE_ERROR


def test_values_in_strings_are_not_counted():
    text = ",[{" * 1_000
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"returnImmediately": True}}}).encode()
    assert "result" in Rpc(make_door(limits={"max_json_values": 20})).post(body).get_json()


SCALARS = (st.none() | st.booleans() | st.integers() | TRICKY
           | st.floats(allow_nan=False, allow_infinity=False))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(TRICKY, inner, max_size=3), max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.booleans(), st.booleans())
def test_values_in_counts_the_values_of_any_json(value, ascii_only, compact):
    separators = (",", ":") if compact else (", ", ": ")
    body = json.dumps(value, ensure_ascii=ascii_only, separators=separators).encode()
    count = values_of(value)
    assert json_counts.count_values(body) == count
    assert json_counts.values_in(body, 10 ** 6) <= 10 ** 6
    assert json_counts.values_in(body, count) <= count < json_counts.values_in(body, count - 1) + 1


# --- limits.reference_bytes: referenced tasks cannot amplify -------------------------


def response_of(task: dict) -> str:
    return task["artifacts"][0]["parts"][0]["text"]


def test_a_chain_of_references_grows_by_each_tasks_own_text():
    rpc = Rpc(make_door(lifecycle={"task_acceptance": "queue", "queue_depth": 1}))
    own = 1_000
    ids, sizes = [], []
    for level in range(10):          # each level references every level before it
        message = {"messageId": f"m{level}", "role": "ROLE_USER",
                   "parts": [{"text": f"level {level} " + "x" * own}],
                   "referenceTaskIds": list(ids)}
        task = rpc.result("SendMessage", {"message": message})["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        ids.append(task["id"])
        sizes.append(len(response_of(task).encode()))
    # The demo agent echoes its text: each level quotes the levels before it, each quote
    # that level's own text only (not the block it was given), so growth is linear.
    line = 80                         # a reference's line and fence, at most
    for level, size in enumerate(sizes):
        assert size <= (level + 1) * (own + 20) + level * line, sizes
    assert sizes[-1] < 12 * 1024, sizes     # doubling per level would be about 512 KiB
    last = response_of(rpc.result("GetTask", {"id": ids[-1]}))
    assert last.count("Referenced tasks:") == 1
    assert last.count("```response references=omitted\n") == 8      # levels 1-8 echoed theirs


def test_a_referenced_response_is_quoted_up_to_the_limit_and_marked():
    rpc = Rpc(make_door(limits={"reference_bytes": 1000},
                        lifecycle={"task_acceptance": "queue", "queue_depth": 1}))
    body = "é" * 600 + "`" * 10 + "z" * 5000          # 1200 bytes of é, then the rest
    first = rpc.result("SendMessage", {"message": {
        "messageId": "a", "role": "ROLE_USER", "parts": [{"text": body}]}})["task"]
    second = rpc.result("SendMessage", {"message": {
        "messageId": "b", "role": "ROLE_USER", "parts": [{"text": "see"}],
        "referenceTaskIds": [first["id"]]}})["task"]
    text = response_of(second)
    total = len(body.encode())
    assert f"- {first['id']}: completed\n```response shown-bytes=1000 total-bytes={total}\n" \
        + "é" * 500 + "\n```" in text


@pytest.mark.parametrize("response, limit", [
    pytest.param("`" * 5000, 1000, id="a backtick run cut"),
    pytest.param("a\n```\n" + "`" * 2000 + "\n```", 2003, id="a fence cut open"),
    pytest.param("\U0001f600" * 100, 10, id="4-byte characters"),
    pytest.param("\ud800" * 100, 10, id="lone surrogates"),
])
def test_a_cut_never_breaks_the_fence(response, limit):
    line = render.reference_line("t", render.RefView("completed", None, response), limit)
    head, _, rest = line.partition("\n")
    assert head == "- t: completed"
    opening, _, rest = rest.partition("\n")
    ticks = opening[:len(opening) - len(opening.lstrip("`"))]
    assert opening[len(ticks):].startswith("response shown-bytes=")
    content, _, closing = rest.rpartition("\n")
    assert closing == ticks and ticks not in content
    assert len(content.encode("utf-8", "surrogatepass")) <= limit
    assert response.startswith(content)


def test_an_echo_is_left_out_only_when_it_is_the_block_the_task_was_given():
    block = "Referenced tasks:\n- tsk_a: completed\n```response\nfour\n```"
    echoes = render.echo_marks(block)
    view = render.RefView("completed", None, f"hello\n\n{block}", echoes)
    assert render.reference_line("t", view) == (
        "- t: completed\n```response references=omitted\nhello\n```")
    faked = render.RefView("completed", None, "hello\n\nReferenced tasks:\n- tsk_a: x", echoes)
    assert render.reference_line("t", faked) == (
        "- t: completed\n```response\nhello\n\nReferenced tasks:\n- tsk_a: x\n```")
    at_start = render.RefView("completed", None, block + "\n\nbye", echoes)
    assert render.reference_line("t", at_start) == (
        "- t: completed\n```response references=omitted\n\n\nbye\n```")


# --- limits.data_text_bytes: data parts rendered for the agent ---------------------------


def test_data_that_renders_past_the_limit_is_refused_early():
    door = make_door(limits={"data_text_bytes": "1Mi"})
    body = data_deep(2 * 1024 ** 2)       # pretty-printed, about 113 MiB: ~5 s of CPU
    answers = []
    # CPU time, measured in turns with the parse of the same body: a ratio that load leaves be.
    refused, parsed = least_cpu(lambda: answers.append(Rpc(door).post(body).get_json()),
                                lambda: accept(body), repeat=2)
    # Refused: about the parse's time (~0.4 s each); rendered whole, ~14 times it.
    assert refused < 4 * parsed, f"refused in {refused:.2f}s, parsed in {parsed:.2f}s"
    payload = answers[-1]
    assert payload["error"]["code"] == -32602
    assert re.fullmatch(r"Invalid params: message\.parts\[\d+\] is data that, pretty-printed "
                        r"for the agent, makes the message's data parts more than "
                        r"limits\.data_text_bytes \(1048576\) bytes", payload["error"]["message"])
    assert Rpc(door).result("ListTasks", {})["tasks"] == []           # no task started


def test_data_within_the_limit_is_rendered_as_before():
    value = {"é": [1, {"b": None}], "s": "\ud800 `x`"}
    assert render.pretty_json(value, 1_000) == json.dumps(value, indent=2, ensure_ascii=False)
    with pytest.raises(render.OverBudget):
        render.pretty_json(value, 10)
    rpc = Rpc(make_door(limits={"data_text_bytes": 60}))
    parts = [{"data": ["a" * 20]}, {"data": ["b" * 20]}]     # 40 bytes each, rendered
    assert rpc.error("SendMessage", send(parts))["message"].startswith(
        "Invalid params: message.parts[1] is data")
    assert "result" in rpc.call("SendMessage", send(parts[:1])).get_json()


def test_a_referenced_failure_message_is_cut_too():
    rpc = Rpc(make_door(limits={"reference_bytes": 100},
                        lifecycle={"task_acceptance": "queue", "queue_depth": 1}))
    failed = rpc.result("SendMessage", {"message": {
        "messageId": "a", "role": "ROLE_USER",
        "parts": [{"text": "/fail " + "why " * 10_000}]}})["task"]
    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    second = rpc.result("SendMessage", {"message": {
        "messageId": "b", "role": "ROLE_USER", "parts": [{"text": "see"}],
        "referenceTaskIds": [failed["id"]]}})["task"]
    line = response_of(second).split("\n")[-1]
    assert line.startswith(f"- {failed['id']}: failed: why why")
    assert line.endswith(" …[cut: 39999 bytes]")
    assert len(line.encode()) < 100 + 80


@pytest.mark.parametrize("depth, answered", [(64, "result"), (65, "error")])
def test_a_body_of_more_brackets_than_a_slice_is_counted_across_its_slices(depth, answered):
    """1,200 arrays each nesting to ``depth``: the count reaches ``too_deep``'s sliced
    reading (wire/json_counts.py), with one more level than the limit only in the last."""
    inner = depth - 6                 # the five of ``nested_request``, and the list of arrays
    chains = [b"[" * 58 + b"]" * 58] * 1_199 + [b"[" * inner + b"]" * inner]
    body = nested_request(5).replace(b'"data":0', b'"data":[' + b",".join(chains) + b"]")
    assert len(body) > 2 * json_counts._SLICE_MARKS
    payload = Rpc(make_door()).post(body).get_json()
    assert answered in payload
    if answered == "error":
        assert payload == PARSE_ERROR
