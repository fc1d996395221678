"""The *TaskPushNotificationConfig methods and SendMessage's config, at the wire, on the
memory store and on Redis."""
from __future__ import annotations

import base64
import re

import pytest
from google.protobuf import json_format

from a2a.types import a2a_pb2
from murmur_wsgi.hub.push.keys import derive_key, encode_key
from tests.hub.conftest import KEY_B, HubClient, send_params, wait_until
from tests.hub.push_util import SECRET, create, push_hub

URL = "https://hooks.example.com/a2a"
PUSH_METHODS = ["CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
                "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"]


@pytest.fixture
def phub(store):
    """Push on as in production: port 443 only, no allowed networks; on each store."""
    h = push_hub(store=store)
    yield h
    h.close(drain_timeout=5)


@pytest.fixture
def prpc(phub):
    return HubClient(phub)


def a_task(rpc) -> str:
    return rpc.send("hello")["id"]


def expected_key(task_id: str, config_id: str, tenant="acme", agent="echo") -> str:
    return encode_key(derive_key(SECRET.encode(), tenant, agent, task_id, config_id))


def test_create_answers_the_config_with_its_key(prpc):
    task_id = a_task(prpc)
    result = create(prpc, task_id, URL, id="c1", token="tok-1",
                    authentication={"scheme": "Bearer"})
    key = expected_key(task_id, "c1")
    assert result == {"id": "c1", "taskId": task_id, "url": URL, "token": "tok-1",
                      "authentication": {"scheme": "Bearer", "credentials": key}}
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", key)
    assert len(base64.urlsafe_b64decode(key + "=")) == 32
    json_format.ParseDict(result, a2a_pb2.TaskPushNotificationConfig(),
                          ignore_unknown_fields=False)


def test_create_without_id_generates_one_and_the_key_is_stable(prpc):
    task_id = a_task(prpc)
    first = create(prpc, task_id, URL)
    assert re.fullmatch(r"[0-9a-f-]{36}", first["id"])
    again = create(prpc, task_id, URL, id=first["id"])
    assert again["authentication"]["credentials"] == first["authentication"]["credentials"]
    other = create(prpc, task_id, URL, id="other")
    assert other["authentication"]["credentials"] != first["authentication"]["credentials"]


def test_key_differs_per_task_tenant_agent(prpc):
    a, b = a_task(prpc), a_task(prpc)
    assert create(prpc, a, URL, id="c")["authentication"]["credentials"] != \
        create(prpc, b, URL, id="c")["authentication"]["credentials"]
    assert expected_key(a, "c", tenant="acme") != expected_key(a, "c", tenant="acm")
    # NOTE: the encoding is unambiguous: moving a character between fields changes the key.
    assert expected_key("ab", "c") != expected_key("a", "bc")


def test_get_and_list_carry_the_token_never_the_key(prpc):
    task_id = a_task(prpc)
    create(prpc, task_id, URL, id="c1", token="tok-1")
    create(prpc, task_id, URL + "/2", id="c2")
    status = {"failures": 0, "disabled": False}
    got = prpc.result("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "c1"})
    assert got == {"id": "c1", "taskId": task_id, "url": URL, "token": "tok-1",
                   "authentication": {"scheme": "Bearer"}, "deliveryStatus": status}
    listed = prpc.result("ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert listed == {"configs": [got, {"id": "c2", "taskId": task_id, "url": URL + "/2",
                                        "authentication": {"scheme": "Bearer"},
                                        "deliveryStatus": status}],
                      "nextPageToken": ""}
    without = {**listed, "configs": [{k: v for k, v in c.items() if k != "deliveryStatus"}
                                     for c in listed["configs"]]}
    json_format.ParseDict(without, a2a_pb2.ListTaskPushNotificationConfigsResponse(),
                          ignore_unknown_fields=False)


def test_list_pages(prpc):
    task_id = a_task(prpc)
    for i in range(3):
        create(prpc, task_id, URL, id=f"c{i}")
    first = prpc.result("ListTaskPushNotificationConfigs", {"taskId": task_id, "pageSize": 2})
    assert [c["id"] for c in first["configs"]] == ["c0", "c1"]
    assert first["nextPageToken"]
    rest = prpc.result("ListTaskPushNotificationConfigs",
                       {"taskId": task_id, "pageSize": 2, "pageToken": first["nextPageToken"]})
    assert [c["id"] for c in rest["configs"]] == ["c2"] and rest["nextPageToken"] == ""
    assert prpc.error("ListTaskPushNotificationConfigs",
                      {"taskId": task_id, "pageToken": "nope"})["code"] == -32602
    assert prpc.error("ListTaskPushNotificationConfigs",
                      {"taskId": task_id, "pageSize": -1})["code"] == -32602


@pytest.mark.parametrize("size", [False, True, 0.0, 2.0, "2", [2]])
def test_a_page_size_that_is_not_a_whole_number_is_invalid_params(prpc, size):
    # NOTE: before, false and 0.0 (equal to 0) were served as the default page.
    task_id = a_task(prpc)
    create(prpc, task_id, URL, id="c1")
    error = prpc.error("ListTaskPushNotificationConfigs", {"taskId": task_id, "pageSize": size})
    assert error == {"code": -32602,
                     "message": "Invalid params: pageSize must be a whole number, 0 or more"}


def test_credentials_of_null_or_empty_are_none_of_the_clients_own(prpc):
    task_id = a_task(prpc)
    for config_id, value in (("null", None), ("empty", "")):
        result = create(prpc, task_id, URL, id=config_id,
                        authentication={"scheme": "Bearer", "credentials": value})
        assert result["authentication"]["credentials"] == expected_key(task_id, config_id)


def test_delete_then_unknown_is_invalid_params(prpc):
    task_id = a_task(prpc)
    create(prpc, task_id, URL, id="c1")
    assert prpc.result("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "c1"}) \
        == {}
    assert prpc.error("DeleteTaskPushNotificationConfig",
                      {"taskId": task_id, "id": "c1"})["code"] == -32602
    assert prpc.error("GetTaskPushNotificationConfig",
                      {"taskId": task_id, "id": "c1"})["code"] == -32602
    assert prpc.result("ListTaskPushNotificationConfigs", {"taskId": task_id})["configs"] == []


@pytest.mark.parametrize("method", PUSH_METHODS)
def test_another_tenants_or_agents_task_is_not_found(phub, prpc, method):
    task_id = a_task(prpc)
    create(prpc, task_id, URL, id="c1")
    params = {"taskId": task_id, "id": "c1", "url": URL}
    other = HubClient(phub, headers={"X-API-Key": KEY_B})
    assert other.error(method, params)["code"] == -32001
    assert prpc.error(method, params, agent="tokens")["code"] == -32001
    assert prpc.error(method, {**params, "taskId": "no-such-task"})["code"] == -32001


@pytest.mark.one_store                  # the memory store's lock and forget, patched
def test_a_task_forgotten_as_its_config_is_created_is_not_found(phub, prpc, monkeypatch):
    task_id = a_task(prpc)
    store, found = phub.store, phub.store.get

    def found_then_forgotten(tenant, agent, wanted):
        task = found(tenant, agent, wanted)
        with store.lock:                      # retention, between the check and the save
            store._forget_locked(wanted)
        return task

    monkeypatch.setattr(store, "get", found_then_forgotten)
    error = prpc.error("CreateTaskPushNotificationConfig",
                       {"taskId": task_id, "id": "c1", "url": URL})
    assert (error["code"], error["message"]) == (-32001, "Task not found")
    monkeypatch.undo()
    assert prpc.error("ListTaskPushNotificationConfigs", {"taskId": task_id})["code"] == -32001
    assert (phub.stores.push._push, phub.stores.push._push_ids) == ({}, {})


def test_at_most_ten_configs_per_task(prpc):
    task_id = a_task(prpc)
    for i in range(10):
        create(prpc, task_id, URL, id=f"c{i}")
    error = prpc.error("CreateTaskPushNotificationConfig",
                       {"taskId": task_id, "url": URL, "id": "c10"})
    assert error == {"code": -32602, "message": "Invalid params: a task has at most 10 push "
                                                "configs; delete one first"}
    assert create(prpc, task_id, URL + "/new", id="c3")["url"] == URL + "/new"


LONG = "https://hooks.example.com/" + "a" * 2020     # 2046 bytes
OWN_CREDENTIALS = ("authentication must not carry credentials: Authorization always carries "
                   "the hub's JWT")
CONFIG_ID = "id must be 1 to 128 of A-Z a-z 0-9 . _ ~ -"
OUTSIDE = "url's host is an address outside the public internet"
NOT_PLAIN = "url's host is not a valid address"
REFUSED = [
    pytest.param({"url": "http://hooks.example.com/a2a"}, "url must be https", id="http"),
    pytest.param({"url": "https://hooks.example.com:8443/a2a"}, "url's port must be one of 443",
                 id="port"),
    pytest.param({"url": LONG + "aaa"}, "url is longer than 2048 bytes", id="long-url"),
    pytest.param({"url": "https://user:pw@hooks.example.com/a2a"},
                 "url must not carry credentials", id="credentials"),
    pytest.param({"url": "https://user@hooks.example.com/a2a"},
                 "url must not carry credentials", id="user"),
    pytest.param({"url": "https://hooks.example.com/a2a#frag"}, "url must not have a fragment",
                 id="fragment"),
    pytest.param({"url": "https:///a2a"}, "url must name a host", id="no-host"),
    # NOTE: C1 controls were accepted in the host, which the dispatcher logs with every
    # dropped event (U+009B is a terminal's CSI).
    pytest.param({"url": "https://a\u009b31mb.example/a2a"},
                 "url must not contain spaces or control characters", id="c1-csi"),
    pytest.param({"url": "https://a\u0080b.example/a2a"},
                 "url must not contain spaces or control characters", id="c1-first"),
    pytest.param({"url": "https://a\tb.example/a2a"},
                 "url must not contain spaces or control characters", id="c0-tab"),
    pytest.param({"url": "not a url"}, "url must not contain spaces or control characters",
                 id="garbage"),
    pytest.param({"url": None}, "url is required (an https URL)", id="no-url"),
    pytest.param({"token": "t" * 513}, "token is longer than 512 bytes", id="long-token"),
    pytest.param({"token": 5}, "token must be a string", id="token-type"),
    pytest.param({"authentication": {"scheme": "Basic"}}, 'authentication must be '
                 '{"scheme": "Bearer"}', id="basic"),
    pytest.param({"authentication": {"scheme": "Bearer", "credentials": "mine"}},
                 OWN_CREDENTIALS, id="own-credentials"),
    pytest.param({"authentication": "Bearer"}, "authentication must be an object",
                 id="auth-type"),
    # NOTE: accepted before: a falsy value of another type read as no credentials.
] + [pytest.param({"authentication": {"scheme": "Bearer", "credentials": value}},
                  OWN_CREDENTIALS, id=f"credentials-{name}")
     for name, value in (("zero", 0), ("false", False), ("object", {}), ("array", []))
] + [
    pytest.param({"tenant": 5}, "tenant must be a string", id="tenant-type"),
    pytest.param({"id": "a/b"}, CONFIG_ID, id="id-slash"),
    pytest.param({"id": "x" * 129}, CONFIG_ID, id="id-long"),
    # NOTE: accepted before ("$" matches before a last newline): the id, newline and all,
    # went into the jti, the configId claim and the dispatcher's log lines.
    pytest.param({"id": "c1\n"}, CONFIG_ID, id="id-newline"),
    pytest.param({"id": "x" * 128 + "\n"}, CONFIG_ID, id="id-long-newline"),
    pytest.param({"secret": "x"}, "secret is not a field of TaskPushNotificationConfig",
                 id="unknown-field"),
] + [pytest.param({"url": f"https://{host}/a2a"}, OUTSIDE, id=f"ip-{host}")
     for host in ("127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
                  "100.64.0.1", "192.0.2.7", "198.51.100.7", "203.0.113.7", "224.0.0.1",
                  "240.0.0.1", "0.0.0.0", "[::1]", "[fe80::1]", "[fc00::1]", "[fd12::1]",
                  "[::ffff:127.0.0.1]", "[::ffff:8.8.8.8]", "[64:ff9b::a00:1]",
                  "[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "[2002:c000:201::1]",
                  "[2001:db8::1]", "[ff02::1]")
] + [pytest.param({"url": f"https://{host}/a2a"}, NOT_PLAIN, id=f"ip-{host}")
     # a host of numbers only: a resolver reads it as an IPv4 address, not written plainly
     for host in ("2130706433", "127.1", "0x7f.0.0.1")
] + [pytest.param({"url": f"https://{host}/a2a"}, OUTSIDE, id=f"idna-{name}")
     # NOTE: accepted before: the hub's own lookup reads them, IDNA-encoded, as 127.0.0.1.
     for name, host in (("fullwidth", "\uff11\uff12\uff17.\uff10.\uff10.\uff11"),
                        ("fullwidth-dots", "\uff11\uff12\uff17\uff0e0\uff0e0\uff0e1"),
                        ("circled", "\u2460\u2461\u2466.0.0.1"))
] + [pytest.param({"url": "https://\uff12\uff11\uff13\uff10\uff17\uff10\uff16\uff14\uff13"
                          "\uff13/a2a"}, NOT_PLAIN, id="idna-fullwidth-decimal")]


@pytest.mark.parametrize("fields, message", REFUSED)
def test_refused_configs_are_invalid_params(prpc, fields, message):
    task_id = a_task(prpc)
    params = {"taskId": task_id, "url": URL, **fields}
    params = {k: v for k, v in params.items() if v is not None}
    error = prpc.error("CreateTaskPushNotificationConfig", params)
    assert error == {"code": -32602, "message": f"Invalid params: {message}"}
    assert prpc.result("ListTaskPushNotificationConfigs", {"taskId": task_id})["configs"] == []


TOKEN_RULE = "token must be printable ASCII, without a space at either end"
URL_RULE = "url's path and query must be ASCII (percent-encode the rest)"
UNWRITABLE = [
    pytest.param({"token": token}, TOKEN_RULE, id=name) for name, token in (
        ("token-crlf", "tk-\r\nX-Injected: 1"), ("token-nul", "tk-\x00"),
        ("token-del", "tk-\x7f"), ("token-beyond-latin-1", "tk-\u2192"),
        # NOTE: accepted before; written as the byte 0xE9 while tokenSha256 hashed UTF-8's
        # C3 A9: a receiver reading raw header bytes could never match it.
        ("token-latin-1", "tk-\u00e9"), ("token-tab", "tk-\tx"),
        # a header's outer spaces are trimmed by its reader: the hash would not match
        ("token-leading-space", " tk"), ("token-trailing-space", "tk "))
] + [
    pytest.param({"url": url}, URL_RULE, id=name) for name, url in (
        ("url-path", "https://hooks.example.com/h\u00e4ok"),
        ("url-query", "https://hooks.example.com/h?q=\u2192"))
]


@pytest.mark.parametrize("fields, message", UNWRITABLE)
def test_a_config_http_cannot_write_is_refused_at_create(prpc, fields, message):
    # NOTE: before, Create saved it and answered its key; every event was then dropped at
    # delivery ("refused: the url or the token cannot be written in an HTTP request").
    task_id = a_task(prpc)
    response = prpc.call("CreateTaskPushNotificationConfig",
                         {"taskId": task_id, "url": URL, "id": "c1", **fields})
    assert response.status_code == 200
    assert response.get_json() == {"jsonrpc": "2.0", "id": prpc.next_id, "error": {
        "code": -32602, "message": f"Invalid params: {message}"}}
    assert prpc.result("ListTaskPushNotificationConfigs", {"taskId": task_id})["configs"] == []


@pytest.mark.parametrize("fields, message", UNWRITABLE[:1] + UNWRITABLE[-2:-1])
def test_a_message_whose_config_http_cannot_write_is_refused(prpc, fields, message):
    response = prpc.call("SendMessage", send_params("hello", configuration={
        "taskPushNotificationConfig": {"url": URL, **fields}}))
    assert response.status_code == 200
    assert response.get_json() == {"jsonrpc": "2.0", "id": prpc.next_id, "error": {
        "code": -32602,
        "message": f"Invalid params: configuration.taskPushNotificationConfig.{message}"}}
    assert prpc.result("ListTasks", {})["tasks"] == []


def test_a_token_of_printable_ascii_is_kept_as_given(prpc):
    task_id = a_task(prpc)
    token = "Bearer-ish a b ~!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}"
    assert create(prpc, task_id, URL, id="p", token=token)["token"] == token


def test_an_idn_host_is_accepted(prpc):
    # The host goes out IDNA-encoded (resolution, TLS, Host): only path, query and token
    # are written as they are.
    task_id = a_task(prpc)
    url = "https://b\u00fccher.example/a2a?q=1"
    assert create(prpc, task_id, url)["url"] == url


def test_url_of_2048_bytes_and_a_public_ip_literal_are_accepted(prpc):
    task_id = a_task(prpc)
    assert len(LONG + "aa") == 2048
    assert create(prpc, task_id, LONG + "aa")["url"] == LONG + "aa"
    assert create(prpc, task_id, "https://8.8.8.8/h", id="ip")["url"] == "https://8.8.8.8/h"
    assert create(prpc, task_id, URL, id="t", token="t" * 512)["token"] == "t" * 512


def test_task_id_is_required(prpc):
    assert prpc.error("CreateTaskPushNotificationConfig", {"url": URL})["code"] == -32602


def test_send_message_saves_the_config_without_the_key(prpc):
    config = {"id": "on-send", "url": URL, "token": "tk"}
    result = prpc.send("hello", configuration={"taskPushNotificationConfig": config})
    assert "credentials" not in str(result)
    task_id = result["id"]
    got = prpc.result("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "on-send"})
    assert got["url"] == URL and got["token"] == "tk"
    key = create(prpc, task_id, URL, id="on-send", token="tk")["authentication"]["credentials"]
    assert key == expected_key(task_id, "on-send")


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
def test_send_message_with_a_refused_config_runs_nothing(prpc, method):
    params = send_params("hello", configuration={"taskPushNotificationConfig": {
        "url": "https://10.0.0.1/h"}})
    error = prpc.error(method, params)
    assert error["code"] == -32602
    assert "configuration.taskPushNotificationConfig.url's host" in error["message"]
    assert prpc.result("ListTasks", {})["tasks"] == []


def test_send_message_config_with_a_task_id_is_refused(prpc):
    params = send_params("hello", configuration={"taskPushNotificationConfig": {
        "url": URL, "taskId": "someone-elses"}})
    assert prpc.error("SendMessage", params)["code"] == -32602


def test_a_repeated_message_saves_its_config_for_later_events(prpc):
    first = prpc.send("hello", message_id="same-id")
    again = prpc.send("hello", message_id="same-id", configuration={
        "taskPushNotificationConfig": {"id": "late", "url": URL}})
    assert again["id"] == first["id"]
    got = prpc.result("GetTaskPushNotificationConfig", {"taskId": first["id"], "id": "late"})
    assert got["deliveryStatus"] == {"failures": 0, "disabled": False}
    wait_until(lambda: prpc.hub.push.dispatcher.idle())
    last = prpc.hub.store.events(first["id"], 0, 0)[0][-1].seq
    assert prpc.hub.stores.push.push_get("acme", "echo", first["id"], "late").cursor == last


def test_a_config_that_cannot_be_saved_ends_its_started_task(phub, prpc, monkeypatch):
    """The task is stored and started before SendMessage's config is saved: when saving
    fails (the store away), the client gets -32603 and the task ends FAILED at once, its
    slot given back, so nothing is left WORKING without a run."""
    from murmur_wsgi.hub.methods import messages
    from murmur_wsgi.hub.store import StoreError

    def unavailable(*args, **kwargs):
        raise StoreError()

    monkeypatch.setattr(messages, "save_message_config", unavailable)
    params = send_params("hello", configuration={"taskPushNotificationConfig": {
        "id": "lost", "url": URL}})
    assert prpc.error("SendMessage", params)["code"] == -32603
    tasks = prpc.result("ListTasks", {})["tasks"]
    assert [t["status"]["state"] for t in tasks] == ["TASK_STATE_FAILED"]
    assert tasks[0]["status"]["message"]["parts"][0]["text"] == messages.NOT_STARTED
    assert phub.admission.running("acme") == 0
    assert not phub.runs.in_flight()
