"""The baseline: the smallest WSGI app that does what the door must do on a POST.

It reads the request body and answers a small JSON body, so the difference to the door
is the door's own work (the layers, the dispatch, the method), not HTTP or gunicorn.
Served by bench/run.py as ``gunicorn -c conf/gunicorn.conf.py bench.bare_app:app``.

``redis_app`` is the floor of a GetTask on Redis: what no GetTask can leave out. It reads
the body, sends the one command a hub's GetTask sends (the ``RECORD`` script, answered as
an ``HMGET`` of a finished task's record, shaped and sized as the hub writes it) through
the hub's own client and helper
(``hub/store/redis_commands.Commands``) on the redis-server of ``BENCH_REDIS_URL``, and
answers what it read as the hub does: the record's wire form in the JSON-RPC envelope,
with the hub's headers. ``make bench`` posts it the hub's request (its path, its
``X-API-Key``, a GetTask of a task id as long). What a hub on Redis pays above it is the hub.
"""
from __future__ import annotations

import threading

BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'
HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]


def _read_body(environ) -> bytes:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    return environ["wsgi.input"].read(length)


def app(environ, start_response):
    _read_body(environ)
    start_response("200 OK", list(HEADERS))
    return [BODY]


RECORD_KEY = "bench:bare:record"
_client = _floor = None


def _record_read():
    """``(the record read's call, the wire form's place in its answer, the hub's headers)``."""
    global _client, _floor
    if _client is None:
        import os

        import functools

        import redis

        from murmur_wsgi.hub.errors import A2A_HEADERS
        from murmur_wsgi.hub.held import LARGE_CHARS
        from murmur_wsgi.hub.store.redis_reads import READ_ONLY, RECORD, RECORD_SHA, WIRE
        from murmur_wsgi.hub.store.redis_client import connect
        from murmur_wsgi.hub.store.redis_commands import Commands

        _client = connect(os.environ["BENCH_REDIS_URL"], 5.0)
        wire = ('{"id":"%s","contextId":"%s","status":{"state":"TASK_STATE_COMPLETED",'
                '"timestamp":"2026-12-01T15:00:00.000Z"},"artifacts":[{"artifactId":"answer",'
                '"name":"answer","parts":[{"text":"hi","mediaType":"text/plain"},{"data":'
                '{"usage":{"input_tokens":0,"output_tokens":0,"credits":0.0,"credits_micros":0,'
                '"pricing_status":"priced"}},"mediaType":"application/json"}]}],"history":'
                '[{"messageId":"m1","contextId":"%s","taskId":"%s","role":"ROLE_USER","parts":'
                '[{"text":"hi"}]}]}') % ("0" * 36, "1" * 36, "1" * 36, "0" * 36)
        _client.hset(RECORD_KEY, mapping={       # the fields and sizes of a finished hub task
            "id": "0" * 36, "ctx": "1" * 36, "tenant": "acme", "agent": "echo", "msg": "m1",
            "state": "TASK_STATE_COMPLETED", "text": "null", "ms": "1764600000000",
            "created": "1764600000000", "seq": "1", "owner": "r" * 32, "nev": "3",
            "wire": wire})
        _client.script_load(RECORD)
        read = functools.partial(Commands(_client), READ_ONLY[0], RECORD_SHA, 1, RECORD_KEY,
                                 LARGE_CHARS)
        try:
            read()
        except redis.ResponseError:     # as the hub's store: a Redis before 7.0, or its ACL
            read = functools.partial(read.func, "EVALSHA", *read.args[1:])
        _floor = (read, WIRE, A2A_HEADERS)
    return _floor


def redis_app(environ, start_response):
    read, at, headers = _record_read()
    _read_body(environ)
    wire = read()[at]                         # the one command a GetTask sends; its wire form
    body = b'{"jsonrpc":"2.0","id":1,"result":%s}' % wire.encode()
    start_response("200 OK", [HEADERS[0], ("Content-Length", str(len(body))), *headers])
    return [body]


# The floor of a blocking SendMessage on Redis: the two round trips a hub's message makes
# (the OPEN script, which lists the run in its replica's runs on one Redis, then END), with
# the hub's own commands, keys and arguments, and its answer: taken once from a message a
# hub on the same Redis served (``_capture``), then sent for each request with fresh ids.
_ID: dict = {}                  # the captured message's ids, replaced in each request's
_send = None
# NOTE: the first requests (a readiness probe's among them) may come at once: one captures.
_setting_up = threading.Lock()


def _capture():
    """``(OPEN's call, END's call, the answer's template)``: one message served by a hub on
    ``BENCH_REDIS_URL`` (its own tenant; no task is ever forgotten), its two scripts'
    commands recorded with the ids replaced by ``_ID``'s marks."""
    import os

    import murmur_wsgi.hub.methods.messages as messages
    from murmur_wsgi.hub.app import create_hub
    from murmur_wsgi.ids import random_uuid

    hub = create_hub({"store": os.environ["BENCH_REDIS_URL"], "public_url": "http://127.0.0.1:1",
                      "limits": {"concurrency": 100_000, "rate_per_minute": 100_000_000},
                      "tasks": {"max_per_tenant": 1_000_000_000},
                      "tenants": {"floor": {"api_keys": ["0" * 64],
                                           "agents": {"echo": {"agent": "demo"}}}}})
    # NOTE: ids no other capture used (a task's log, a messageId's claim stay in Redis).
    _ID.update(task=random_uuid(), context=random_uuid(), message="floor-" + random_uuid())
    store, calls = hub.store, {}
    store._listed.add("floor")   # NOTE: a tenant's first end in a process lists it, once
    for name in ("OPEN", "END"):
        def record(keys=(), args=(), before=(), short=False, _name=name,
                   _run=store._scripts[name]):
            calls[_name] = (list(keys), list(args), list(before), short)
            return _run(keys=keys, args=args, before=before, short=short)
        store._scripts[name] = record
    ids = iter((_ID["task"], _ID["context"]))
    real, messages.random_uuid = messages.random_uuid, lambda: next(ids)
    try:
        wire = messages.send_message(hub, _FloorCall())
    finally:
        messages.random_uuid = real
        hub.close()
    return calls["OPEN"], calls["END"], str(wire)


class _FloorCall:
    """A blocking SendMessage of ``_ID``'s message to the floor's agent."""

    id = 1
    method = "SendMessage"
    tenant = "floor"
    subject = "api-key"
    agent = "echo"
    environ: dict = {}

    def __init__(self):
        self.params = {"message": {"messageId": _ID["message"], "role": "ROLE_USER",
                                   "parts": [{"text": "hi"}]}}


def _formats(values) -> list:
    """``[(where, its %-format)]`` of the ``values`` that name the captured ids."""
    found = []
    for i, value in enumerate(values):
        if isinstance(value, str) and any(mark in value for mark in _ID.values()):
            text = value.replace("%", "%%")
            for name, mark in _ID.items():
                text = text.replace(mark, f"%({name})s")
            found.append((i, text))
    return found


def _templated(call) -> tuple:
    """A script call as ``(how many keys, [every key and arg, its formats], [each
    before-command, its formats], whether it is short)``."""
    keys, args, before, short = call
    flat = [*keys, *args]
    return (len(keys), (flat, _formats(flat)),
            [(list(command), _formats(command)) for command in before], short)


def _filled(values: list, formats: list, ids: dict) -> list:
    """A copy of ``values`` with ``ids`` in the places ``formats`` names (a C format each)."""
    values = list(values)
    for i, text in formats:
        values[i] = text % ids
    return values


def _fresh(templated, ids: dict) -> tuple:
    """The call's keys, args, before-commands with ``ids``, and whether it is short."""
    nkeys, (flat, formats), before, short = templated
    flat = _filled(flat, formats, ids)
    return flat[:nkeys], flat[nkeys:], [tuple(_filled(command, found, ids))
                                        for command, found in before], short


def _floor_send():
    global _send
    if _send is not None:
        return _send
    with _setting_up:
        if _send is None:
            _send = _set_up()
    return _send


def _set_up() -> tuple:
    """What every request of the floor sends and answers (a hub's message, captured)."""
    import itertools
    import os

    from murmur_wsgi.hub.errors import A2A_HEADERS
    from murmur_wsgi.hub.store import redis_scripts as scripts
    from murmur_wsgi.hub.store.redis import DURABLE
    from murmur_wsgi.hub.store.redis_client import connect
    from murmur_wsgi.hub.store.redis_commands import Commands
    from murmur_wsgi.ids import random_uuid

    opened, ended, answer = _capture()
    answer = _formats([answer])[0][1]                    # its %-format
    commands = Commands(connect(os.environ["BENCH_REDIS_URL"], 5.0))
    runs = {name: commands.script(getattr(scripts, name), durable=name in DURABLE)
            for name in ("OPEN", "END")}
    return (runs, _templated(opened), _templated(ended), answer, A2A_HEADERS,
            random_uuid, itertools.count())


def redis_send_app(environ, start_response):
    """A blocking SendMessage's floor on Redis: its two round trips and its answer."""
    runs, opened, ended, answer, headers, new_id, count = _floor_send()
    _read_body(environ)
    ids = {"task": new_id(), "context": new_id(), "message": f"{_ID['message']}-{next(count)}"}
    keys, args, before, short = _fresh(opened, ids)
    code, _ = runs["OPEN"](keys=keys, args=args, before=before, short=short)
    if code != 0:                            # not a new task: not the hub's work
        raise RuntimeError(f"the floor's OPEN answered {code}, not 0 (a new task)")
    keys, args, before, short = _fresh(ended, ids)
    runs["END"](keys=keys, args=args, before=before, short=short)
    body = b'{"jsonrpc":"2.0","id":1,"result":%s}' % (answer % ids).encode()
    start_response("200 OK", [HEADERS[0], ("Content-Length", str(len(body))), *headers])
    return [body]
