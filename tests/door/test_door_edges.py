"""Edges of the door's headers, manifest and agent calls: HTTP's whitespace is space and
tab only, a manifest text JSON cannot carry is refused, an agent's calls are typed."""
from __future__ import annotations

import os

import pytest
from werkzeug.test import Client

from murmur_wsgi import create_app
from murmur_wsgi.door.manifest import ManifestError
from murmur_wsgi.uris import STREAM_URI
from tests.agents_util import one_task, tried
from tests.conftest import Rpc
from tests.door.test_completions import completion_headers
from tests.door.test_streams import run
from tests.sse_util import open_stream, shape, msg, stream_door
from tests.tasks_util import send_params

NBSP, NEL = "\xa0", "\x85"


# 1. Last-Event-ID: DECISIONS §3 "A Last-Event-ID that is not a number replays as from 0";
#    "3\xa0" is not a number (HTTP's whitespace is space and tab, as for Authorization).
@pytest.mark.parametrize("last_event_id, replayed", [
    pytest.param("3" + NBSP, range(1, 8), id="nbsp-is-not-a-number"),
    pytest.param(NEL + "3", range(1, 8), id="nel-is-not-a-number"),
    pytest.param(" 3\t", range(4, 8), id="ows-still-3"),
])
def test_last_event_id_padded_with_a_unicode_space_is_not_a_number(last_event_id, replayed):
    door = stream_door()
    rpc = Rpc(door)
    run(rpc, "/stream 3")                                                  # events 1..7
    watch = open_stream(rpc, "murmur.WatchSession", {}, {"Last-Event-ID": last_event_id})
    events = watch.wait_heartbeat()
    assert [e.id for e in events[1:]] == list(replayed)
    watch.close()
    door.close()


# 2. x-murmur-completion-session: step 9 "addressed to another session, -31001".
def test_a_completion_session_padded_with_a_unicode_space_is_misaddressed():
    door = create_app({"name": "parent", "version": "0.1.0"})
    rpc = Rpc(door)
    try:
        named = door.session.id + NBSP
        error = rpc.error("SendMessage", send_params("x"),
                          completion_headers(door, "dlg_x", session_id=named))
        assert error["code"] == -31001
    finally:
        door.close()


# 3. A2A-Extensions: "By sending A2A-Extensions: <URI>"; "<URI>\xa0" is another text.
def test_an_extension_uri_padded_with_a_unicode_space_activates_nothing():
    rpc = Rpc(stream_door())
    stream = open_stream(rpc, "SendStreamingMessage", msg("hi"),
                         {"A2A-Extensions": STREAM_URI + NBSP})
    assert "A2A-Extensions" not in stream.response.headers
    assert "connection-ack" not in shape(stream.rest())


# 4. exports.files.root holding a lone surrogate: the listing is JSON, which cannot carry it
#    (every GET /resources/files failed, a JSON-RPC -32603 on the plane): refused at load.
def test_a_files_root_holding_a_surrogate_does_not_break_the_listing(tmp_path):
    os.makedirs(os.fsencode(tmp_path) + b"/caf\xe9")
    root = os.fsdecode(b"caf\xe9/")
    try:
        door = create_app({"name": "t", "version": "0.1.0",
                           "exports": {"files": {"root": root, "mode": "read-only"}}},
                          workdir=str(tmp_path))
    except ManifestError as refused:          # refused at load, one line: acceptable
        assert str(refused).startswith("exports.files.root: ")
        return
    try:
        answer = Client(door).get("/resources/files")
        assert answer.status_code == 200
        assert "jsonrpc" not in answer.get_json()
    finally:
        door.close()


# 5. An agent's record may carry any field name, ctx.record_event's own parameter names
#    (event_type, self) too: they raised TypeError in the agent's call.
@pytest.mark.parametrize("field, answer", [("self", "recorded"),
                                           ("event_type", "refused: AgentValueError")])
def test_an_agents_record_may_carry_a_field_named_like_record_events_parameters(field, answer):
    agent = tried(lambda ctx: ctx.record_event("note", **{field: "x"}), ok="recorded")
    with one_task(agent) as (_, task):
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"][0]["text"] == answer


# 6. agent.process may hold a lone surrogate (a file system's bytes); the harness_start
#    record names its binary in the trace's JSON line (UTF-8): on a traced door every task
#    of a harness whose file name is not UTF-8 failed.
def test_a_harness_whose_name_is_not_utf8_runs_on_a_traced_door(tmp_path, monkeypatch):
    from tests.agents_util import UPPER_PY, process_manifest, tmp_home
    tmp_home(tmp_path, monkeypatch)
    link = os.fsencode(tmp_path) + b"/pyth\xe9n"           # the interpreter, renamed
    os.symlink(os.fsencode(UPPER_PY[0]), link)
    argv = [os.fsdecode(link), UPPER_PY[1]]
    door = create_app(process_manifest(argv), listen="127.0.0.1:41873", trace=True)
    try:
        task = Rpc(door).result("SendMessage", send_params("hello"))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    finally:
        door.close()


# 8. x-murmur-task-trust read with str.strip(): "trusted\xa0" was read as trusted.
def test_a_trust_padded_with_a_unicode_space_is_untrusted():
    from tests.door.test_completions import Delegator
    from tests.tasks_util import NOW, wait_state
    agent = Delegator()
    door = create_app({"name": "parent", "version": "0.1.0"}, agent=agent)
    rpc = Rpc(door)
    try:
        task = rpc.result("SendMessage", send_params("delegate", NOW))["task"]
        assert agent.opened.wait(10)
        rpc.result("SendMessage", send_params("hi"),
                   completion_headers(door, agent.delegation_id, trust="trusted" + NBSP))
        done = wait_state(door, task["id"], "TASK_STATE_COMPLETED")
        assert done.response == ("child said: <untrusted-content source=task:completion>\n"
                                 "hi\n</untrusted-content>")
    finally:
        door.close()
