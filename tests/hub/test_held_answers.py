"""Large answers held for clients still reading them are counted (hub/held.py): a tenant's
at most ``limits.answer_bytes`` on a worker, every tenant's at most
``limits.worker_answer_bytes``; one more is -32603 at once, and a closed answer gives its
bytes back.

Before, every large answer was a copy of its own held for as long as its client read it:
twenty clients of one key reading a 60 MiB task slowly (each piece within the write
deadline) held about 2 GB of one worker.
"""
from __future__ import annotations

import gc
import json
import logging
import socket
import struct
import threading

import pytest
from werkzeug.serving import make_server
from werkzeug.test import EnvironBuilder

from murmur_wsgi.hub import create_hub

from tests.hub.conftest import (KEY_A, KEY_B, HubClient, close_hub, hub_config, refused_task,
                               send_params, wait_until)

MIB = 1024 ** 2


def _hub(store: str, **limits):
    config = hub_config(store=store)
    config["limits"] = {**config["limits"], "answer_bytes": 3 * MIB,
                        "worker_answer_bytes": 4 * MIB, **limits}
    return create_hub(config)


def _open(rpc, method: str, params: dict):
    """The call's answer, its body not read yet (as a client that reads slowly)."""
    return rpc.call(method, params, buffered=False)


def _whole(response) -> dict:
    try:
        return json.loads(b"".join(response.iter_encoded()))
    finally:
        response.close()


def _refusal(response, setting: str, request_id: int) -> None:
    assert response.status_code == 200
    assert _whole(response) == {"jsonrpc": "2.0", "id": request_id, "error": {
        "code": -32603, "message": f"Internal error: this worker holds as many large answers "
        f"as it may ({setting}) for clients still reading them; try again once they are read"}}


def test_a_tenants_large_answers_are_bounded_and_given_back_when_read(store):
    """Pages of ListTasks (a copy on both stores): a tenant holds two of about 1 MiB, not a
    third (its 3 MiB); another tenant holds one more, not a second (the worker's 4 MiB);
    each closed answer gives its bytes back, and what was refused is then answered whole."""
    hub = _hub(store)
    try:
        acme, globex = HubClient(hub), HubClient(hub, headers={"X-API-Key": KEY_B})
        mine = refused_task(hub, MIB)
        theirs = refused_task(hub, MIB, "globex")
        page = {"includeArtifacts": True}
        held = [_open(acme, "ListTasks", page), _open(acme, "ListTasks", page)]
        assert hub.held.held("acme") > 2 * MIB
        _refusal(_open(acme, "ListTasks", page), "limits.answer_bytes", acme.next_id)
        held.append(_open(globex, "ListTasks", page))
        _refusal(_open(globex, "ListTasks", page), "limits.worker_answer_bytes",
                 globex.next_id)
        assert hub.held.held() == hub.held.held("acme") + hub.held.held("globex")
        first = held.pop(0)
        assert [t["id"] for t in _whole(first)["result"]["tasks"]] == [mine]
        assert [t["id"] for t in _whole(_open(globex, "ListTasks", page))["result"]["tasks"]] \
            == [theirs]
        for response in held:
            response.close()
        assert hub.held.held() == 0
        assert acme.result("GetTask", {"id": mine, "historyLength": 0})["id"] == mine
    finally:
        close_hub(hub)


def test_a_task_read_off_redis_is_counted_a_kept_one_is_not(store):
    """GetTask of a finished task: on Redis each answer is a copy (counted, the third
    refused); the memory store's answers quote the form it keeps (none counted)."""
    hub = _hub(store)
    try:
        acme = HubClient(hub)
        task_id = refused_task(hub, MIB)
        held = [_open(acme, "GetTask", {"id": task_id}) for _ in range(2)]
        third = _open(acme, "GetTask", {"id": task_id})
        if hub.store.shared:
            _refusal(third, "limits.answer_bytes", acme.next_id)
        else:
            held.append(third)
            assert hub.held.held() == 0
        for response in held:
            assert _whole(response)["result"]["id"] == task_id
        assert hub.held.held() == 0
        # rendered for its historyLength: a copy on either store
        cut = _open(acme, "GetTask", {"id": task_id, "historyLength": 1})
        assert hub.held.held() > MIB
        assert _whole(cut)["result"]["history"][0]["parts"][0]["text"] == "x" * MIB
        assert hub.held.held() == 0
    finally:
        close_hub(hub)


def test_refusals_repeated_are_logged_once_a_minute_per_tenant(store, caplog):
    hub = _hub(store)
    try:
        acme = HubClient(hub)
        refused_task(hub, MIB)
        held = [_open(acme, "ListTasks", {}) for _ in range(2)]
        with caplog.at_level(logging.WARNING, logger="murmur_wsgi.hub.held"):
            for _ in range(5):
                _refusal(_open(acme, "ListTasks", {}), "limits.answer_bytes", acme.next_id)
        lines = [r.getMessage() for r in caplog.records if r.name == "murmur_wsgi.hub.held"]
        assert len(lines) == 1 and "tenant acme refused: limits.answer_bytes" in lines[0]
        for response in held:
            response.close()
    finally:
        close_hub(hub)


@pytest.mark.parametrize("tenant_bytes", [256 * 1024, 3 * MIB])
def test_one_answer_is_always_taken_however_large(store, tenant_bytes):
    """A tenant holding none takes one answer past its bound (no task is too large to be
    read), and the worker holding none takes one past its own."""
    hub = _hub(store, answer_bytes=tenant_bytes, worker_answer_bytes=512 * 1024)
    try:
        acme, globex = HubClient(hub), HubClient(hub, headers={"X-API-Key": KEY_B})
        refused_task(hub, MIB)
        refused_task(hub, MIB, "globex")
        one = _open(acme, "ListTasks", {})
        _refusal(_open(globex, "ListTasks", {}), "limits.worker_answer_bytes", globex.next_id)
        one.close()
        assert len(_whole(_open(globex, "ListTasks", {}))["result"]["tasks"]) == 1
        assert hub.held.held() == 0
    finally:
        close_hub(hub)


def test_a_message_sent_again_is_answered_as_a_counted_copy(store):
    """A SendMessage of a messageId already answered is its task again, as GetTask's: a
    copy of the request's own on either store (the snapshot rendered, wrapped in
    ``{"task": …}``). It was not counted: any number of clients sending one message again
    each held a copy of its task, past ``limits.answer_bytes``."""
    hub = _hub(store, max_body_bytes=4 * MIB)
    try:
        acme = HubClient(hub)
        params = send_params("x" * MIB)
        task = acme.result("SendMessage", params)["task"]     # ~2 MiB: the echo's answer
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        again = _open(acme, "SendMessage", params)
        assert hub.held.held("acme") > 2 * MIB
        _refusal(_open(acme, "SendMessage", params), "limits.answer_bytes", acme.next_id)
        assert _whole(again)["result"]["task"]["id"] == task["id"]
        assert hub.held.held() == 0
        immediately = {**params, "configuration": {"returnImmediately": True}}
        assert _whole(_open(acme, "SendMessage", immediately))["result"]["task"]["id"] \
            == task["id"]
        assert hub.held.held() == 0
    finally:
        close_hub(hub)


def test_cancel_answers_are_counted_as_gettask_answers(store):
    """CancelTask's answer, the task as it was cut, is counted as GetTask's: a copy on Redis
    (the third of a tenant's refused, the cancels all done), the memory store's kept form
    quoted (none counted). Before, any number of cancels' answers were held uncounted."""
    hub = _hub(store, max_body_bytes=4 * MIB)
    try:
        acme = HubClient(hub, agent="held")
        ids = [acme.result("SendMessage", send_params(f"cut-{i} " + "x" * MIB, configuration={
            "returnImmediately": True}))["task"]["id"] for i in range(3)]
        for task_id in ids:
            wait_until(lambda t=task_id: hub.runs.get(t) is not None)
        held = [_open(acme, "CancelTask", {"id": task_id}) for task_id in ids[:2]]
        third = _open(acme, "CancelTask", {"id": ids[2]})
        if hub.store.shared:
            assert hub.held.held("acme") > 2 * MIB
            _refusal(third, "limits.answer_bytes", acme.next_id)
        else:
            held.append(third)
            assert hub.held.held() == 0
        for response in held:
            assert _whole(response)["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        assert hub.held.held() == 0
        for task_id in ids:           # every cancel was done, its answer refused or not
            assert acme.result("GetTask", {"id": task_id, "historyLength": 0})["status"][
                "state"] == "TASK_STATE_CANCELED"
    finally:
        close_hub(hub)


def _post(hub, params: dict) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                       "params": params}).encode()
    return (f"POST /a2a/v1/agents/echo HTTP/1.1\r\nHost: hub\r\nA2A-Version: 1.0\r\n"
            f"X-API-Key: {KEY_A}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def test_an_answer_werkzeug_drops_unclosed_is_given_back(store):
    """Werkzeug's server (``--dev``) reads what is left of a request once its answer is
    written, and a client that sent bytes more, read the answer and reset the
    connection makes that read raise: the answer is never closed. Its bytes were held for
    good (the tenant's bound taken for every later answer); a dropped answer gives them
    back."""
    hub = _hub(store)
    server = make_server("127.0.0.1", 0, hub, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        task_id = refused_task(hub, MIB)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            # NOTE: more than the server's buffered reader takes with the request, so that
            # some wait on the socket when it looks for what is left: it reads them, then
            # waits for more (a few bytes, all buffered, let it close the answer at once
            # when its look came within 10 ms: a race, lost once on a loaded machine).
            client.sendall(_post(hub, {"id": task_id, "historyLength": 1}) + b"m" * 65536)
            read = b""
            while not read.endswith(b"}}"):
                read += client.recv(1 << 20)
            assert hub.held.held("acme") > MIB
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        assert json.loads(read.partition(b"\r\n\r\n")[2])["result"]["id"] == task_id
        wait_until(lambda: hub.held.held() == 0)
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()
        close_hub(hub)


def test_an_answer_dropped_unclosed_is_given_back(store):
    """An embedding that drops the answer's iterable without ``close()`` (against WSGI)
    does not keep its bytes counted for good."""
    hub = _hub(store)
    try:
        task_id = refused_task(hub, MIB)
        environ = EnvironBuilder(path="/a2a/v1/agents/echo", method="POST", headers={
            "A2A-Version": "1.0", "X-API-Key": KEY_A}, content_type="application/json",
            data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                             "params": {"id": task_id, "historyLength": 1}})).get_environ()
        body = hub(environ, lambda status, headers, exc_info=None: None)
        next(iter(body))
        assert hub.held.held("acme") > MIB
        del body
        gc.collect()
        assert hub.held.held() == 0
    finally:
        close_hub(hub)
