"""A run's own stream: its backlog bounded in bytes, tokens merged, a lagged reader, pieces;
a task's log replayed in pieces."""
from __future__ import annotations

import json

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.live import PIECE_CHARS, TAKE_BYTES, LiveBacklog
from murmur_wsgi.hub.methods.streams import EventSource
from murmur_wsgi.streams.sse import PENDING_BYTES

from tests.hub.conftest import (HubClient, close_hub, hub_config, send_params, wait_until,
                                 whole_log)


def render(text: str, append: bool) -> str:
    return json.dumps({"artifactUpdate": {"append": append, "text": text}})


def backlog(limit: int = 1 << 20, artifacts=(), text: str = "") -> LiveBacklog:
    return LiveBacklog(limit, render, lambda: (list(artifacts), text))


def chunks(payloads: list[str]) -> list[tuple[bool, str]]:
    found = [json.loads(p).get("artifactUpdate") for p in payloads]
    return [(c["append"], c["text"]) for c in found if c is not None]


def test_a_reader_that_keeps_up_gets_each_token_alone():
    live = backlog()
    for word in ("alpha", " beta", " gamma"):
        live.token(word)
    assert chunks(live.take()) == [(False, "alpha"), (True, " beta"), (True, " gamma")]
    live.token(" delta")
    assert chunks(live.take()) == [(True, " delta")]
    assert not live.pending() and live.bytes == 0


def test_a_reader_behind_gets_the_tokens_merged_in_bounded_pieces():
    live = backlog(limit=8 << 20)
    tokens = [f"token {i:07d} " for i in range(100_000)]      # 1.4 MB of text
    for token in tokens:
        live.token(token)
    got, takes = [], 0
    while live.pending():
        batch = live.take()
        takes += 1
        pieces = chunks(batch)
        assert all(len(text) <= PIECE_CHARS for _, text in pieces)
        assert sum(len(p) for p in batch) <= TAKE_BYTES + PIECE_CHARS + 200
        got.extend(pieces)
    assert "".join(text for _, text in got) == "".join(tokens)
    assert [append for append, _ in got] == [False] + [True] * (len(got) - 1)
    assert len(got) < len(tokens) / 100 and takes > 1


def test_the_backlog_is_bounded_and_a_lagged_reader_gets_the_task_as_it_stands():
    state = {"artifacts": [], "text": ""}
    live = LiveBacklog(64 * 1024, render, lambda: (state["artifacts"], state["text"]))
    live.event('{"statusUpdate": "working"}')
    live.token("first")
    assert chunks(live.take()) == [(False, "first")]
    streamed = "first"
    for i in range(20_000):                                  # 200 KB, the reader away
        token = f" word{i:05d}"
        streamed += token
        live.token(token)
        assert live.bytes <= live.limit
        if i == 10:
            live.event('{"statusUpdate": "progress 1"}')
        if i == 15_000:
            live.event('{"statusUpdate": "progress 2"}')
    assert live.lagged >= 1
    state.update(artifacts=['{"artifactUpdate": {"append": false, "text": "named"}}'],
                 text=streamed)
    live.end(['{"artifactUpdate": {"append": true, "text": "usage"}}', '{"statusUpdate": "end"}'])
    taken = []
    while live.pending():
        taken.extend(live.take())
    # The latest status, the named artifact whole, the answer's text whole, then the end.
    assert taken[0] == '{"statusUpdate": "progress 2"}'
    pieces = chunks(taken[1:-1])
    assert pieces[0] == (False, "named")
    text = pieces[1:-1]
    assert text[0][0] is False and all(append for append, _ in text[1:])
    assert "".join(t for _, t in text) == streamed
    assert pieces[-1] == (True, "usage") and taken[-1] == '{"statusUpdate": "end"}'


def test_the_end_comes_after_everything_taken_before_it():
    live = backlog()
    live.token("a")
    live.event('{"statusUpdate": "x"}')
    live.end(['{"statusUpdate": "end"}'])
    assert live.take(budget=1) == [render("a", False)]
    assert live.take(budget=1) == ['{"statusUpdate": "x"}', '{"statusUpdate": "end"}']
    assert not live.pending()


def test_a_stream_that_falls_behind_is_lagged_and_still_ends_with_the_answer(store):
    hub = create_hub(hub_config(store=store, stream={"live_backlog_bytes": "64Ki"}))
    try:
        words = [f"w{i:06d}" for i in range(12_000)]            # 96 KB of tokens
        response = HubClient(hub).call("SendStreamingMessage", send_params(" ".join(words)),
                                       agent="tokens")
        body = iter(response.response)
        opening = next(body)                # the Task (its frame may come in pieces)
        while b"\n\n" not in opening:
            opening += next(body)               # then no reading
        frame = opening.split(b"\n\n", 1)[0].decode()
        task_id = json.loads(frame.split("data: ", 1)[1])["result"]["task"]["id"]
        run = hub.runs.get(task_id)
        wait_until(lambda: run.ended)                           # the agent streamed it all
        assert run.live.lagged >= 1
        rest = list(body)
        assert all(len(chunk) <= PENDING_BYTES for chunk in rest)
        text = (opening + b"".join(rest)).decode()
        events = [json.loads(line[6:])["result"] for line in text.split("\n")
                  if line.startswith("data: ")]
        updates = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
        texts, final = updates[:-1], updates[-1]
        assert final["lastChunk"] and "data" in final["artifact"]["parts"][-1]   # the usage
        # The lagged reader got the answer's text so far (append false), then the rest.
        restart = max(i for i, u in enumerate(texts) if not u["append"])
        answer = " ".join(words)
        assert "".join(u["artifact"]["parts"][0]["text"] for u in texts[restart:]) == answer
        assert all(len(u["artifact"]["parts"][0]["text"]) <= PIECE_CHARS for u in texts)
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        close_hub(hub)


def test_a_long_log_is_replayed_in_pieces(store):
    hub = create_hub(hub_config(store=store, events={"merge_secs": 0.001}))
    try:
        words = [f"w{i:06d}" for i in range(40_000)]            # 320 KB, stored in pieces
        client = HubClient(hub)
        task = client.send(" ".join(words), agent="tokens")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        logged = whole_log(hub.store, task["id"])
        assert sum(map(len, logged)) > 2 * TAKE_BYTES
        source = EventSource(hub.store, hub.store.get("acme", "tokens", task["id"]))
        replayed, done, calls = [], False, 0
        while not done:
            batch, done = source.read(1.0)
            calls += 1
            assert sum(map(len, batch)) <= TAKE_BYTES + max(map(len, logged))
            replayed.extend(batch)
        assert replayed == logged and calls >= 3
    finally:
        close_hub(hub)
