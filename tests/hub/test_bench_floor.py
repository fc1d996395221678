"""make bench's floors on Redis (bench/bare_app.py): a blocking SendMessage's
(``redis_send_app``), the hub's own two round trips, with fresh ids, and its answer; a
GetTask's (``redis_app``), the hub's own record read."""
from __future__ import annotations

import importlib
import io
import json

from murmur_wsgi.hub.store.redis_commands import Commands
from murmur_wsgi.hub.store.redis_keys import msg_key, task_key
from murmur_wsgi.hub.store.redis_reads import RECORD_SHA, RecordReads


def _post(app) -> dict:
    seen = []
    body = b"".join(app({"CONTENT_LENGTH": "2", "wsgi.input": io.BytesIO(b"{}")},
                        lambda status, headers: seen.append(status)))
    assert seen == ["200 OK"]
    return json.loads(body)


def test_the_send_floor_is_the_hubs_two_round_trips_with_fresh_ids(redis_server, monkeypatch):
    redis_server.flush()
    monkeypatch.setenv("BENCH_REDIS_URL", redis_server.url)
    import bench.bare_app

    floor = importlib.reload(bench.bare_app)        # its own capture, on this Redis
    _post(floor.redis_send_app)                      # the capture: a hub's own message
    trips = []
    several = Commands.several

    def counted(self, *commands, **options):
        trips.append([command[0] for command in commands])
        return several(self, *commands, **options)
    monkeypatch.setattr(Commands, "several", counted)
    tasks = [_post(floor.redis_send_app)["result"]["task"] for _ in range(2)]
    assert trips == [["EVALSHA"], ["EVALSHA"]] * 2, trips
    assert tasks[0]["id"] != tasks[1]["id"]
    assert tasks[0]["contextId"] != tasks[1]["contextId"]
    client = redis_server.client()
    for task in tasks:
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["history"][0]["taskId"] == task["id"]
        # The answer is what the hub's END stored, byte for byte (but the captured time).
        stored = client.hget(task_key("floor", task["id"]), "wire")
        assert json.loads(stored) == task
        message_id = task["history"][0]["messageId"]
        assert client.get(msg_key("floor", "echo", message_id)) == task["id"]


def test_the_send_floor_s_first_requests_at_once_capture_once(redis_server, monkeypatch):
    """A readiness probe and the first requests may come together: one captures, all
    answer, and the hub's id maker is the hub's again after."""
    import threading

    import bench.bare_app
    import murmur_wsgi.hub.methods.messages as messages

    redis_server.flush()
    monkeypatch.setenv("BENCH_REDIS_URL", redis_server.url)
    floor = importlib.reload(bench.bare_app)
    made = messages.random_uuid
    tasks, failed = [], []

    def post():
        try:
            tasks.append(_post(floor.redis_send_app)["result"]["task"]["id"])
        except Exception as ex:  # noqa: BLE001 - reported by the assertion below
            failed.append(ex)
    threads = [threading.Thread(target=post) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failed == [] and len(set(tasks)) == 4
    assert messages.random_uuid is made


def test_the_get_task_floor_sends_the_hubs_record_read(redis_server, monkeypatch):
    redis_server.flush()
    monkeypatch.setenv("BENCH_REDIS_URL", redis_server.url)
    import bench.bare_app as floor

    # NOTE: not reloaded (a reload would drop the send floor's connections unclosed): its
    # client is made at its first read, on BENCH_REDIS_URL, and closed and forgotten here.
    assert floor._client is None
    try:
        read, at, _ = floor._record_read()
        assert read.args[:2] == (RecordReads._read_by[0], RECORD_SHA)
        answer = _post(floor.redis_app)["result"]
        assert answer == json.loads(read()[at])
        assert answer["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        if floor._floor is not None:
            floor._floor[0].func.close()
            floor._client.close()
        floor._client = floor._floor = None
