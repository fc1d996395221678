"""The /metrics page: opt-in, the operator's on an authenticated door, and what it counts."""
from __future__ import annotations

import re
import threading
import time

import pytest
from werkzeug.test import Client

from murmur_wsgi import create_app
from murmur_wsgi.door.metrics import BUCKETS, CONTENT_TYPE, method_label, render
from tests.conftest import Rpc
from tests.sse_util import DEADLINE, GateAgent, msg, open_stream

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-z_]+="(?:[^"\\\n]|\\.)*",?)*\})? '
                    r'(-?[0-9.e+-]+|\+Inf)$')
FAMILIES = ("murmur_tasks", "murmur_tasks_evicted_total", "murmur_open_streams",
            "murmur_held_requests", "murmur_background_commands",
            "murmur_events_published_total", "murmur_events_dropped_total",
            "murmur_session_closing", "murmur_connections_cut_total", "murmur_requests_total",
            "murmur_request_duration_seconds")
AUTH = {"scheme": "bearer", "credentials": {"watcher": {"scopes": ["GetTask"]}}}


def metrics_door(agent=None, **overrides):
    manifest = {"name": "metered", "version": "0.1.0", "observability": {"metrics": True},
                "stream": {"heartbeat_secs": 0.2}}
    manifest.update(overrides)
    return create_app(manifest, agent, listen="127.0.0.1:41873")


def parse(text: str) -> dict:
    """Parse the exposition strictly: every family declared once, before its samples."""
    assert text.endswith("\n")
    samples, declared = {}, []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("gauge", "counter", "histogram"), line
            assert name not in declared, f"{name} declared twice"
            declared.append(name)
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name = match.group(1)
        assert any(name == fam or name.startswith(fam + "_") for fam in declared), line
        key = _canonical(line.rsplit(" ", 1)[0])
        assert key not in samples, f"sample {key} twice"
        samples[key] = float(line.rsplit(" ", 1)[1].replace("+Inf", "inf"))
    assert tuple(declared) == FAMILIES
    return samples


LABEL = re.compile(r'([a-z_]+)="((?:[^"\\\n]|\\.)*)"')


def _canonical(key: str) -> str:
    """A sample's name and labels in one order (``le`` last): label order means nothing."""
    if "{" not in key:
        return key
    name, rest = key.split("{", 1)
    pairs = sorted(LABEL.findall(rest), key=lambda pair: (pair[0] == "le", pair[0]))
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def scrape(door, headers=None) -> dict:
    response = Client(door).get("/metrics", headers=headers or {})
    assert response.status_code == 200, response.get_data()
    assert response.headers["Content-Type"] == CONTENT_TYPE
    return parse(response.get_data(as_text=True))


def test_off_by_default_metrics_is_the_ordinary_404():
    door = create_app({"name": "plain", "version": "0.1.0"}, listen="127.0.0.1:41873")
    client = Client(door)
    metrics, other = client.get("/metrics"), client.get("/no-such-path")
    assert metrics.status_code == other.status_code == 404
    assert metrics.get_data() == other.get_data()
    assert "text/plain" not in metrics.headers["Content-Type"]


def test_a_fresh_door_reports_zeros():
    samples = scrape(metrics_door())
    assert samples['murmur_tasks{state="TASK_STATE_WORKING"}'] == 0
    assert len([k for k in samples if k.startswith("murmur_tasks{")]) == 8
    for name in ("murmur_open_streams", "murmur_held_requests", "murmur_events_published_total",
                 "murmur_events_dropped_total", "murmur_session_closing",
                 "murmur_background_commands"):
        assert samples[name] == 0, name
    for reason in ("header_timeout", "body_timeout", "write_timeout", "reserve"):
        assert samples[f'murmur_connections_cut_total{{reason="{reason}"}}'] == 0, reason


def test_requests_tasks_and_latency_after_a_task():
    door = metrics_door()
    rpc = Rpc(door)
    task = rpc.result("SendMessage", msg("hello"))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert rpc.error("GetTask", {"id": "tsk_nope"})["code"] == -32001
    rpc.call("no/such.method")
    samples = scrape(door)
    assert samples['murmur_tasks{state="TASK_STATE_COMPLETED"}'] == 1
    assert samples['murmur_requests_total{method="SendMessage",outcome="ok"}'] == 1
    assert samples['murmur_requests_total{method="GetTask",outcome="-32001"}'] == 1
    # An unknown method is counted as "other", never under the name the client sent.
    assert samples['murmur_requests_total{method="other",outcome="-32601"}'] == 1
    assert not any("no/such.method" in key for key in samples)
    assert samples["murmur_events_published_total"] == door.session.ring.published >= 4
    buckets = [samples[f'murmur_request_duration_seconds_bucket{{method="SendMessage",'
                       f'le="{_le(b)}"}}'] for b in BUCKETS] + [
        samples['murmur_request_duration_seconds_bucket{method="SendMessage",le="+Inf"}']]
    assert buckets == sorted(buckets) and buckets[-1] == 1
    assert samples['murmur_request_duration_seconds_count{method="SendMessage"}'] == 1
    assert samples['murmur_request_duration_seconds_sum{method="SendMessage"}'] > 0


def _le(bound: float) -> str:
    return repr(float(bound))                 # the exposition writes 1.0, 0.0025


def test_held_requests_and_open_streams_are_gauges():
    agent = GateAgent()
    door = metrics_door(agent)
    rpc = Rpc(door)
    answers = []
    held = threading.Thread(target=lambda: answers.append(Rpc(door).result(
        "SendMessage", msg("/gate"))))
    held.start()
    try:
        assert agent.started.wait(DEADLINE)
        # NOTE: the agent starts before its SendMessage holds: scraped between, the gauge
        # was 0 on a loaded machine.
        deadline = time.monotonic() + DEADLINE
        while door.session.manager.held != 1 and time.monotonic() < deadline:
            time.sleep(0.005)  # wait-ok: polling a condition with a deadline
        watch = open_stream(rpc, "murmur.WatchSession", {})
        samples = scrape(door)
        assert samples["murmur_held_requests"] == 1
        assert samples["murmur_open_streams"] == 1
        assert samples['murmur_tasks{state="TASK_STATE_WORKING"}'] == 1
    finally:
        agent.gate.set()
        held.join(DEADLINE)
    assert not held.is_alive()
    assert answers[0]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    watch.close()
    samples = scrape(door)
    assert samples["murmur_held_requests"] == 0
    assert samples["murmur_open_streams"] == 0
    assert samples['murmur_requests_total{method="murmur.WatchSession",outcome="stream"}'] == 1


def test_events_a_slow_reader_missed_are_counted_as_dropped():
    door = metrics_door(stream={"heartbeat_secs": 0.2, "reader_queue": 2})
    rpc = Rpc(door)
    watch = open_stream(rpc, "murmur.WatchSession", {})
    assert watch.next().frame_name == "connection-ack"
    rpc.result("SendMessage", msg("/stream 10"))          # 14 events while the watch sleeps
    lagged = watch.until(lambda e: e.frame_name == "lagged")[-1]
    watch.close()
    assert lagged.frame["missed"] > 0
    assert scrape(door)["murmur_events_dropped_total"] == lagged.frame["missed"]


def test_closing_is_reported():
    door = metrics_door()
    door.close()
    assert scrape(door)["murmur_session_closing"] == 1


@pytest.mark.parametrize("who, status, error", [
    pytest.param(None, 401, "unauthenticated", id="no-token"),
    pytest.param("wrong", 401, "invalid_token", id="wrong-token"),
    pytest.param("watcher", 403, "insufficient_scope", id="credential"),
])
def test_an_authenticated_door_serves_it_to_the_operator_only(who, status, error):
    door = metrics_door(network={"authentication": AUTH})
    token = door.tokens.tokens.get(who, who)
    headers = {"Authorization": f"Bearer {token}"} if who else {}
    response = Client(door).get("/metrics", headers=headers)
    assert response.status_code == status
    assert response.get_json()["error"] == error
    assert response.headers["WWW-Authenticate"].startswith('Bearer realm="metered"')
    operator = {"Authorization": f"Bearer {door.tokens.tokens['operator']}"}
    samples = scrape(door, operator)
    assert samples[f'murmur_requests_total{{method="metrics",outcome="{error}"}}'] == 1


def test_head_has_the_length_and_no_body_and_post_is_not_the_page():
    door = metrics_door()
    client = Client(door)
    head = client.head("/metrics")
    assert head.status_code == 200 and head.get_data() == b""
    assert int(head.headers["Content-Length"]) > 0
    post = client.post("/metrics", data=b"{}", content_type="application/json")
    assert post.status_code == 404


@pytest.mark.parametrize("environ, name, label", [
    pytest.param({}, "SendMessage", "SendMessage", id="served"),
    pytest.param({}, "CreateTaskPushNotificationConfig", "CreateTaskPushNotificationConfig",
                 id="push"),
    pytest.param({}, "x" * 1000, "other", id="unknown"),
    pytest.param({"PATH_INFO": "/.well-known/agent-card.json"}, None, "agent-card", id="card"),
    pytest.param({"PATH_INFO": "/resources/files/a"}, None, "resources", id="plane"),
    pytest.param({"PATH_INFO": "/"}, None, "none", id="refused-before-the-body"),
])
def test_method_labels_are_bounded(environ, name, label):
    assert method_label(environ, name) == label


def test_label_values_are_escaped():
    door = metrics_door()
    door.metrics.requests[('a"b\\c\nd', "ok")] = 1
    assert 'murmur_requests_total{method="a\\"b\\\\c\\nd",outcome="ok"} 1.0' in render(door)
    parse(render(door))


def test_a_peer_is_refused_metrics_as_every_other_request():
    from murmur_wsgi import create_app
    from werkzeug.test import Client

    door = create_app({"name": "m", "version": "1", "observability": {"metrics": True}})
    client = Client(door)
    refused = client.get("/metrics", headers={"x-murmur-task-origin": "peer"})
    other = client.get("/nope", headers={"x-murmur-task-origin": "peer"})
    assert refused.status_code == 403
    assert refused.get_data() == other.get_data()
    assert client.get("/metrics").status_code == 200
