"""ListTasks: order, pages, filters, totalSize and every refusal, at the wire."""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.rfc3339 import rfc3339_us
from tests.conftest import Rpc, make_door
from tests.tasks_util import DEADLINE, NOW, send_params

TS_MESSAGE = ("statusTimestampAfter must be an RFC 3339 timestamp, such as "
              "2026-10-13T09:00:00Z")


@pytest.fixture
def filled():
    """A door holding 7 completed tasks in two contexts, and one failed."""
    rpc = Rpc(make_door(lifecycle={"task_acceptance": "queue", "queue_depth": 10}))
    ids = []
    for i in range(7):
        ctx = "ctx-a" if i % 2 == 0 else "ctx-b"
        ids.append(rpc.result("SendMessage", send_params(f"t{i}", contextId=ctx))["task"]["id"])
    ids.append(rpc.result("SendMessage", send_params("/fail no", contextId="ctx-a"))
               ["task"]["id"])
    yield rpc, ids
    rpc.door.close()


def walk(rpc, **params):
    seen, token, pages = [], "", 0
    while True:
        page = rpc.result("ListTasks", dict(params, pageToken=token))
        seen += [t["id"] for t in page["tasks"]]
        pages += 1
        token = page["nextPageToken"]
        if not token:
            return seen, pages, page


def test_most_recently_changed_first_and_members_always_present(filled):
    rpc, ids = filled
    page = rpc.result("ListTasks", {})
    assert list(page) == ["tasks", "nextPageToken", "pageSize", "totalSize"]
    assert [t["id"] for t in page["tasks"]] == ids[::-1]
    assert page["nextPageToken"] == ""
    assert page["pageSize"] == 50
    assert page["totalSize"] == 8
    assert all("artifacts" not in t for t in page["tasks"])
    assert page["tasks"][1] == {k: v for k, v in rpc.result("GetTask", {"id": ids[6]}).items()
                                if k != "artifacts"}


def test_pages_walk_every_task_once(filled):
    rpc, ids = filled
    seen, pages, last = walk(rpc, pageSize=3)
    assert seen == ids[::-1]
    assert pages == 3
    assert last["totalSize"] == 8
    assert last["pageSize"] == 3


def test_page_size_is_clamped_to_100(filled):
    rpc, _ = filled
    assert rpc.result("ListTasks", {"pageSize": 1000})["pageSize"] == 100


def test_filters_apply_to_every_page(filled):
    rpc, ids = filled
    seen, _, last = walk(rpc, contextId="ctx-a", pageSize=2)
    assert seen == [ids[7], ids[6], ids[4], ids[2], ids[0]]
    assert last["totalSize"] == 5
    seen, _, last = walk(rpc, status="TASK_STATE_FAILED")
    assert seen == [ids[7]]
    assert last["totalSize"] == 1
    seen, _, last = walk(rpc, status="TASK_STATE_AUTH_REQUIRED")
    assert seen == [] and last["totalSize"] == 0
    seen, _, _ = walk(rpc, status="TASK_STATE_UNSPECIFIED", contextId="")
    assert len(seen) == 8


def test_status_timestamp_after_includes_a_copied_cutoff(filled):
    rpc, ids = filled
    cutoff = rpc.result("GetTask", {"id": ids[5]})["status"]["timestamp"]
    seen, _, last = walk(rpc, statusTimestampAfter=cutoff)
    assert ids[5] in seen and ids[7] in seen
    assert last["totalSize"] == len(seen)
    offset = cutoff.replace("Z", "+00:00")
    assert walk(rpc, statusTimestampAfter=offset)[0] == seen
    assert len(walk(rpc, statusTimestampAfter=None)[0]) == 8


def test_include_artifacts(filled):
    rpc, ids = filled
    tasks = rpc.result("ListTasks", {"includeArtifacts": True})["tasks"]
    assert tasks[0]["artifacts"] == []                     # the failed task
    assert tasks[1]["artifacts"][0]["artifactId"] == "response"


def test_a_task_that_changes_moves_ahead_of_the_cursor():
    rpc = Rpc(make_door(lifecycle={"task_acceptance": "queue", "queue_depth": 10}))
    paused = rpc.result("SendMessage", send_params("/ask Which?"))["task"]["id"]
    b, c, d = [rpc.result("SendMessage", send_params(f"q{i}", NOW))["task"]["id"]
               for i in range(3)]
    first = rpc.result("ListTasks", {"pageSize": 2})
    assert [t["id"] for t in first["tasks"]] == [d, c]
    rpc.result("CancelTask", {"id": b})                      # b changes during the walk
    rest = rpc.result("ListTasks", {"pageSize": 2, "pageToken": first["nextPageToken"]})
    assert [t["id"] for t in rest["tasks"]] == [paused]
    assert rest["nextPageToken"] == ""
    assert rest["totalSize"] == 4
    assert rpc.result("ListTasks", {})["tasks"][0]["id"] == b
    rpc.door.close()


@pytest.mark.parametrize("params, message", [
    pytest.param({"contextId": 5}, "Invalid params: contextId must be a string", id="contextId"),
    pytest.param({"status": "completed"}, "Invalid params: status must be a TASK_STATE_* name",
                 id="status"),
    pytest.param({"status": []}, "Invalid params: status must be a TASK_STATE_* name",
                 id="status-list"),
    pytest.param({"status": {"a": 1}}, "Invalid params: status must be a TASK_STATE_* name",
                 id="status-object"),
    pytest.param({"pageSize": 0}, "Invalid params: pageSize must be an integer from 1",
                 id="pageSize-0"),
    pytest.param({"pageSize": 2.5}, "Invalid params: pageSize must be an integer from 1",
                 id="pageSize-float"),
    pytest.param({"pageSize": True}, "Invalid params: pageSize must be an integer from 1",
                 id="pageSize-bool"),
    pytest.param({"pageToken": "bogus"},
                 "Invalid params: pageToken is not a nextPageToken this door answered",
                 id="pageToken"),
    pytest.param({"pageToken": 3},
                 "Invalid params: pageToken is not a nextPageToken this door answered",
                 id="pageToken-int"),
    pytest.param({"statusTimestampAfter": "yesterday"}, TS_MESSAGE, id="ts-word"),
    pytest.param({"statusTimestampAfter": "2026-10-13 09:00:00"}, TS_MESSAGE, id="ts-no-zone"),
    pytest.param({"statusTimestampAfter": 1700000000}, TS_MESSAGE, id="ts-number"),
    pytest.param({"includeArtifacts": "yes"},
                 "Invalid params: includeArtifacts must be a boolean", id="includeArtifacts"),
    pytest.param({"contextId": 5, "status": "x", "pageSize": 0},
                 "Invalid params: contextId must be a string", id="first-refused-answers"),
    pytest.param({"status": "x", "pageSize": 0},
                 "Invalid params: status must be a TASK_STATE_* name", id="order-status"),
    pytest.param({"pageSize": 0, "pageToken": "bogus"},
                 "Invalid params: pageSize must be an integer from 1", id="order-pageSize"),
    pytest.param({"pageToken": "bogus", "statusTimestampAfter": "x"},
                 "Invalid params: pageToken is not a nextPageToken this door answered",
                 id="order-pageToken"),
    pytest.param({"statusTimestampAfter": "x", "includeArtifacts": "y"}, TS_MESSAGE,
                 id="order-statusTimestampAfter"),
    # null is not absent: only statusTimestampAfter reads it as "every task".
    pytest.param({"contextId": None}, "Invalid params: contextId must be a string",
                 id="contextId-null"),
    pytest.param({"status": None}, "Invalid params: status must be a TASK_STATE_* name",
                 id="status-null"),
    pytest.param({"pageSize": None}, "Invalid params: pageSize must be an integer from 1",
                 id="pageSize-null"),
    pytest.param({"pageToken": None},
                 "Invalid params: pageToken is not a nextPageToken this door answered",
                 id="pageToken-null"),
    pytest.param({"includeArtifacts": None},
                 "Invalid params: includeArtifacts must be a boolean", id="includeArtifacts-null"),
])
def test_refusals(rpc, params, message):
    assert rpc.error("ListTasks", params) == {"code": -32602, "message": message}


def test_history_length_and_unknown_members_are_ignored(rpc):
    page = rpc.result("ListTasks", {"historyLength": "anything", "other": 1})
    assert page == {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}


def test_a_token_of_another_door_is_refused(filled):
    rpc, _ = filled
    token = rpc.result("ListTasks", {"pageSize": 1})["nextPageToken"]
    other = Rpc(make_door())
    assert other.error("ListTasks", {"pageToken": token})["code"] == -32602


def test_a_forged_token_with_unicode_digits_is_refused(filled):
    import base64
    rpc, _ = filled
    token = rpc.result("ListTasks", {"pageSize": 1})["nextPageToken"]
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    tag = raw.partition(":")[2]
    forged = base64.urlsafe_b64encode(f"\u00b2:{tag}".encode()).decode().rstrip("=")
    assert rpc.error("ListTasks", {"pageToken": forged})["code"] == -32602


def test_a_cutoff_past_a_tasks_millisecond_by_less_than_a_microsecond_leaves_it_out(rpc):
    # statusTimestampAfter keeps the tasks whose status.timestamp is at or after it. Digits
    # past the microsecond were dropped: a cutoff of T plus 0.1 µs listed the task at T.
    task = rpc.result("SendMessage", send_params("x"))["task"]
    stamp = task["status"]["timestamp"]                       # …HH:MM:SS.mmmZ
    for cutoff, listed in ((stamp, 1), (stamp[:-1] + "000000Z", 1),
                           (stamp[:-1] + "0001Z", 0), (stamp[:-1] + "000000001Z", 0)):
        page = rpc.result("ListTasks", {"statusTimestampAfter": cutoff})
        assert page["totalSize"] == listed, cutoff


@pytest.mark.parametrize("cutoff", ["2016-12-31T23:59:60Z", "2016-12-31T23:59:60.5Z",
                                    "2017-01-01T08:59:60+09:00"])
def test_a_leap_second_is_an_rfc3339_timestamp(rpc, cutoff):
    # RFC 3339's time-second runs to 60 for a leap second; such a cutoff was refused as not
    # a timestamp. It reads as the end of its minute, which no clock stamps a task inside.
    rpc.result("SendMessage", send_params("x"))
    assert rpc.result("ListTasks", {"statusTimestampAfter": cutoff})["totalSize"] == 1
    assert rfc3339_us(cutoff) == rfc3339_us("2017-01-01T00:00:00Z")


@pytest.mark.parametrize("cutoff, micros", [
    ("0000-01-01T00:00:00Z", -62_167_219_200_000_000),
    ("0000-02-29T00:00:00.5Z", -62_162_121_599_500_000),       # year 0 is a leap year
    ("0000-12-31T23:59:60Z", -62_135_596_800_000_000),
    ("0000-12-31T23:00:00-01:00", -62_135_596_800_000_000),
])
def test_a_cutoff_in_year_0000_is_an_rfc3339_timestamp(rpc, cutoff, micros):
    # RFC 3339's date-fullyear is any 4 digits, 0000 included; such a cutoff was refused
    # as not a timestamp. It is read on the proleptic Gregorian calendar, as every year is.
    rpc.result("SendMessage", send_params("x"))
    assert rpc.result("ListTasks", {"statusTimestampAfter": cutoff})["totalSize"] == 1
    assert rfc3339_us(cutoff) == micros


@pytest.mark.parametrize("cutoff", ["2026-10-13T09:00:60Z", "2016-12-31T23:59:61Z",
                                    "2016-12-31T23:59:60+01:00"])
def test_a_second_60_outside_a_leap_second_is_refused(rpc, cutoff):
    assert rpc.error("ListTasks", {"statusTimestampAfter": cutoff}) == {
        "code": -32602, "message": TS_MESSAGE}


def test_a_token_with_anything_added_or_padded_is_refused(filled):
    import base64
    rpc, _ = filled
    token = rpc.result("ListTasks", {"pageSize": 1})["nextPageToken"]
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    seq, _, tag = raw.partition(":")
    zeros = base64.urlsafe_b64encode(f"000{seq}:{tag}".encode()).decode().rstrip("=")
    assert rpc.result("ListTasks", {"pageSize": 1, "pageToken": token})["tasks"]
    for altered in (token + "$$", token + "=", token + "====", token + "\n", token[:2] + "!"
                    + token[2:], zeros):
        error = rpc.error("ListTasks", {"pageSize": 1, "pageToken": altered})
        assert error == {"code": -32602, "message": "Invalid params: pageToken is not a "
                         "nextPageToken this door answered"}, altered


def test_an_artifact_written_during_a_walk_does_not_hide_its_task():
    # "A walk returns every matching task once while no matching task changes state": an
    # agent's artifact chunk is no change of state, so its task keeps its place.
    first_chunk, go, second_chunk, finish = (threading.Event() for _ in range(4))

    def agent(ctx):
        if "stream" not in ctx.text:
            return "done"
        with ctx.artifacts.stream("log") as out:
            out.write("one")
            first_chunk.set()
            go.wait(DEADLINE)
            out.write("two")
            second_chunk.set()
            finish.wait(DEADLINE)
        return "streamed"

    door = create_app({"name": "walk", "version": "0.1.0",
                       "lifecycle": {"task_acceptance": "queue"}}, agent=agent)
    rpc = Rpc(door)
    try:
        streaming = rpc.result("SendMessage", send_params("stream", NOW))["task"]["id"]
        assert first_chunk.wait(DEADLINE)
        stamp = rpc.result("GetTask", {"id": streaming})["status"]["timestamp"]
        queued = rpc.result("SendMessage", send_params("later", NOW))["task"]["id"]
        first = rpc.result("ListTasks", {"pageSize": 1})
        assert [t["id"] for t in first["tasks"]] == [queued]
        go.set()
        assert second_chunk.wait(DEADLINE)
        rest = rpc.result("ListTasks", {"pageSize": 1, "pageToken": first["nextPageToken"]})
        assert [t["id"] for t in rest["tasks"]] == [streaming]
        task = rpc.result("GetTask", {"id": streaming})
        assert task["status"] == {"state": "TASK_STATE_WORKING", "timestamp": stamp}
        assert [a["artifactId"] for a in task["artifacts"]] == ["log"]
        assert [p["text"] for p in task["artifacts"][0]["parts"]] == ["one", "two"]
    finally:
        finish.set()
        door.close()
