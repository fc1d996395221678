"""The Redis task store (``store: redis://host:port/db``): every replica of a hub shares it.

The key layout (every key starts with ``murmur:{hub}:``, names in ``redis_keys``)
is in docs/hub.md (ListTasks' sorted sets: ``redis_index``);
each step that must be atomic (a message's acceptance: claim, admission,
creation and start; create, start, append, end, the cancel mark, a claim's
release) is one Lua script (``redis_scripts``), so a task has exactly one
final state and no event follows it. Every event written is
announced on a channel, and the connection's one listener
(``redis_feed.EventFeed``) serves every stream of the process: a waiting
stream costs no Redis command, an event one read per process that streams its
task. Cancel marks are published on a channel of their own, heard by the same
listener.

Failures: every failure of Redis is raised as ``StoreError``, whose
message is public (``redis_client``). The other parts on the same
connection (``redis_client.RedisConnection``): the replicas' liveness and
sweep (``redis_replicas``), admission's counters (``redis_limits``), push
configs (``redis_push``).

Concurrency:
    The redis-py client and its pool are thread-safe; nothing here is shared
    between threads but ``_contexts``, ``_tenants`` (caches of the tasks this
    replica created), ``_marked`` (when it last marked a task its streams read),
    all guarded by the GIL's atomic dict operations, and the connection's
    ``closed`` (an Event).
"""
from __future__ import annotations

import json
import logging
import time

from murmur_wsgi.hub.store import redis_scripts as scripts
from murmur_wsgi.hub.store.base import PENDING, Opened, StoredEvent, TaskStore, Written
from murmur_wsgi.hub.store.counters import CONCURRENCY, RATE
from murmur_wsgi.hub.store.redis_client import each_task
from murmur_wsgi.hub.store.redis_client import guarded as _guarded
from murmur_wsgi.hub.store.redis_index import RedisIndex
from murmur_wsgi.hub.store.redis_limits import RedisCounters
from murmur_wsgi.hub.store.redis_keys import (CHANNEL, PREFIX, REPLICAS, both_key, done_key,
                                              events_key, index_key, mark_key, msg_key,
                                              rate_key, running_key, runs_key, seq_key,
                                              state_key, task_key, updated_key)
from murmur_wsgi.hub.store.retention import TRIM_BATCH, Retention
from murmur_wsgi.hub.task import WORKING, HubTask, status_update, task_status
from murmur_wsgi.wire import task as wire_task
from murmur_wsgi.wire.encode import compact_utf8 as _dumps
from murmur_wsgi.wire.stream import task_event
from murmur_wsgi.wire.task import now_ms

logger = logging.getLogger(__name__)

CLAIM_TTL_MS = 60_000            # a claim whose replica died before its task was created
MARK_TTL_MS = 3_600_000          # a cancel mark outlives any run it could reach
MAX_ID_BYTES = 256               # a task id longer than this names no task
WATCH_MS = 300_000               # a read watches its task this long (redis_scripts.READ)
REWATCH_SECS = 60.0              # … marked again this often while a stream here reads it
END_PAYLOADS = 18                # the END script's first payload, in ARGV (1-based)
DURABLE = ("OPEN", "CREATE", "START", "APPEND", "END", "MARK")   # acknowledged: redis.wait_replicas
# What a read of one record asks for (one HMGET, its owner first): a finished task's
# wire form, else what rebuilds it (``_record``).
RECORD_FIELDS = ("tenant", "agent", "wire", "id", "ctx", "msg", "state", "text", "ms",
                 "created", "seq", "hist", "arts")


def _payload_and_end(fields: list) -> tuple[str, bool]:
    """An event entry's raw fields (``p`` its payload, ``t`` "1" when it is the last)."""
    found = dict(zip(fields[::2], fields[1::2]))
    return found["p"], found["t"] == "1"


class RedisTaskStore(TaskStore):
    """Tasks, their index, events, claims and cancel marks, in one Redis (``conn``)."""

    shared = True

    def __init__(self, conn, *, retention_secs: float = 86_400.0, max_events: int = 10_000,
                 retention: Retention | None = None):
        self.conn = conn
        self.replica = conn.replica
        self._redis = conn.redis
        self._command = conn.command
        self._block = conn.block
        self._retention_ms = int(retention_secs * 1000)
        self._max_events = max_events
        self._keep = retention or Retention()
        self._scripts = {name: self._command.script(getattr(scripts, name),
                                                    durable=name in DURABLE)
                         for name in ("OPEN", "CREATE", "START", "APPEND", "END", "RELEASE", "MARK",
                                      "RETAIN", "READ", "WATCH")}
        self._contexts: dict[str, str] = {}
        self._tenants: dict[str, str] = {}        # as _contexts: the running tasks' tenants
        # As _contexts: when this process last marked a task its streams read (watched).
        self._marked: dict[str, float] = {}
        self._index = RedisIndex(self._redis, self._load)

    # --- records -----------------------------------------------------------

    @staticmethod
    def _record(fields: dict | None) -> HubTask | None:
        if not fields or fields.get("id") is None:
            return None
        task = HubTask(fields["id"], fields["ctx"], fields["tenant"], fields["agent"],
                       fields["msg"], None)
        wire = fields.get("wire")
        if wire is None:                  # a task still running (or stored before ``wire``)
            task.history = json.loads(fields["hist"])
            task.artifacts = json.loads(fields["arts"])
        else:                             # a finished one: its wire form holds them
            whole = json.loads(wire)
            task.history = whole.get("history", [])
            task.artifacts = whole.get("artifacts", [])
        task.state = fields["state"]
        task.status_text = json.loads(fields["text"])
        task.status_ms = int(fields["ms"])
        task.created_ms = int(fields["created"])
        task.seq = int(fields["seq"])
        task._json = wire
        return task

    def _load(self, task_ids: list) -> list:
        records = each_task(self._redis, task_ids, lambda pipe, t: pipe.hgetall(task_key(t)))
        return [task for task in map(self._record, records) if task is not None]

    def _kept(self, tenant: str) -> tuple:
        """The retention script's arguments for ``tenant``: retention ms, cap, batch."""
        secs, cap = self._keep.of(tenant)
        return int(secs * 1000), cap, TRIM_BATCH

    def _tenant_of(self, task_id: str) -> str:
        return self._tenants.get(task_id) or self._redis.hget(task_key(task_id), "tenant") or ""

    def _context_of(self, task_id: str) -> str:
        context_id = self._contexts.get(task_id)
        if context_id is None:
            context_id = self._redis.hget(task_key(task_id), "ctx") or ""
        return context_id

    # --- idempotency -------------------------------------------------------

    @_guarded
    def claim_message(self, tenant, agent, message_id):
        key = msg_key(tenant, agent, message_id)
        for _ in range(3):
            # NOTE: not waited for (wait_replicas): the task's creation binds the messageId
            # in the same key, and waits; a claim lost with its primary was never answered.
            if self._command("SET", key, PENDING, "NX", "PX", CLAIM_TTL_MS):
                return None
            found = self._command("GET", key)
            if found is not None:
                return found
        return PENDING        # claimed and released twice meanwhile: someone is at it

    @_guarded
    def release_message(self, tenant, agent, message_id):
        self._scripts["RELEASE"](keys=[msg_key(tenant, agent, message_id)])

    # --- tasks -----------------------------------------------------------

    @_guarded
    def create(self, task, event, bind=True):
        task.seq = int(self._scripts["CREATE"](**self.create_call(task, event, bind)))
        if not task.terminal:
            self._contexts[task.id] = task.context_id
            self._tenants[task.id] = task.tenant

    def create_call(self, task, event: str, bind: bool = True, state: str | None = None,
                    ms: int | None = None) -> dict:
        """The CREATE script's ``keys`` and ``args`` for ``task`` (a pipeline may send many);
        ``state`` and ``ms``: the record's state and status time, if not the task's."""
        state = state or task.state
        keys = [task_key(task.id), index_key(task.tenant, task.agent),
                index_key(task.tenant, task.agent, task.context_id),
                seq_key(task.tenant, task.agent),
                msg_key(task.tenant, task.agent, task.message_id),
                events_key(task.id), runs_key(self.replica), REPLICAS,
                state_key(task.tenant, task.agent, state),
                updated_key(task.tenant, task.agent),
                both_key(task.tenant, task.agent, state, task.context_id),
                done_key(task.tenant)]
        # NOTE: a task refused at its creation keeps its message once, in its wire form: its
        # first event is stored as '' and read as {"task": wire} (``_filled``).
        args = [task.id, task.context_id, task.tenant, task.agent, task.message_id, state,
                _dumps(task.status_text), ms or task.status_ms, task.created_ms,
                _dumps(task.history), _dumps(task.artifacts), self.replica,
                "1" if bind else "0", "" if task.terminal else event,
                "1" if task.terminal else "0", self._retention_ms,
                task.to_json(cache=False) if task.terminal else "", PREFIX,
                *self._kept(task.tenant)]
        return {"keys": keys, "args": args}

    def open(self, task, event, counters, concurrency, rate, claimed=False):
        if not isinstance(counters, RedisCounters):
            return super().open(task, event, counters, concurrency, rate, claimed)
        # PERF: one round trip (the OPEN script): claim, admission, creation and start.
        ms = now_ms()
        started = status_update(task.id, task.context_id,
                                task_status(task.id, task.context_id, WORKING, None, ms))
        call = self.create_call(task, event, state=WORKING, ms=ms)
        code, value = self._open(
            keys=call["keys"] + [running_key(task.tenant), rate_key(task.tenant)],
            args=call["args"] + ["1" if claimed else "0", concurrency, rate, counters.lease_ms,
                                 started, self._max_events])
        if code == 1:
            return Opened(found=value)
        if code == 2:
            return Opened(refused=(CONCURRENCY, RATE)[int(value) - 1])
        task.seq = int(value)
        self._contexts[task.id] = task.context_id
        self._tenants[task.id] = task.tenant
        return Opened(started=started)

    @_guarded
    def _open(self, keys, args):
        return self._scripts["OPEN"](keys=keys, args=args)

    def _fields(self, task_id: str, tenant: str | None = None,
                agent: str | None = None) -> dict | None:
        """The record's fields (one ``HMGET``), None unless it is ``tenant``'s ``agent``'s
        (when named) and exists."""
        if len(task_id) > MAX_ID_BYTES:
            return None
        values = self._command("HMGET", task_key(task_id), *RECORD_FIELDS)
        if values[0] is None or (tenant is not None and values[:2] != [tenant, agent]):
            return None
        return dict(zip(RECORD_FIELDS, values))

    @_guarded
    def get(self, tenant, agent, task_id):
        return self._record(self._fields(task_id, tenant, agent))

    @_guarded
    def task_json(self, tenant, agent, task_id):
        fields = self._fields(task_id, tenant, agent)
        if fields is None:
            return None
        if fields["wire"] is not None:                # finished: its wire form, as it is
            return fields["wire"]
        task = self._record(fields)
        return None if task is None else task.to_json(cache=False)

    @_guarded
    def start(self, task_id):
        ms = now_ms()
        context_id = self._context_of(task_id)
        payload = status_update(task_id, context_id, task_status(task_id, context_id, WORKING,
                                                                 None, ms))
        done = self._scripts["START"](keys=[task_key(task_id), events_key(task_id)],
                                      args=[ms, payload, self._max_events, PREFIX])
        return payload if done else None

    @_guarded
    def append(self, task_id, event, n=0):
        return bool(self._scripts["APPEND"](
            keys=[task_key(task_id), events_key(task_id)],
            args=[event, self._max_events, n]))

    @_guarded
    def end(self, task_id, state, text, artifacts, events, numbered=(0, 0), answer=None,
            keep=False):
        ms = now_ms()
        context_id = self._context_of(task_id)
        status = task_status(task_id, context_id, state, text, ms)
        written = list(events) + [status_update(task_id, context_id, status)]
        # The finished task's wire form up to its artifacts: the script completes it.
        head = _dumps(wire_task.task(task_id, context_id, status))[:-1]
        if artifacts is None:
            arts = ""
        elif answer is None:
            arts = _dumps(artifacts)
        else:                           # the answer's JSON is sent once, the others apart
            arts = _dumps(artifacts[:-1])[1:-1]
        # PERF: the answer (megabytes for a long one) is one argument, sent in pieces
        # (redis_client): the event that carries it is sent as its text around it.
        at, tail, payloads = 0, "", []
        for i, payload in enumerate(written):
            if isinstance(payload, tuple):
                if answer is not None and len(payload) == 3 and payload[1] is answer:
                    at, tail = END_PAYLOADS + i, payload[2]
                    payload = payload[0]
                else:
                    payload = "".join(payload)
            payloads.append(payload)
        done = self._scripts["END"](
            keys=[task_key(task_id), events_key(task_id)],
            args=[state, _dumps(text), ms, arts, self._retention_ms, self._max_events,
                  PREFIX, head, *self._kept(self._tenant_of(task_id)), *numbered,
                  answer or "", at, tail, "1" if keep else "0", *payloads])
        self._contexts.pop(task_id, None)
        self._tenants.pop(task_id, None)
        if not done:
            return None
        return Written(written, done if keep else None)

    @_guarded
    def render(self, task, history_length=None, artifacts=True, cache=True, as_read=False):
        # NOTE: the record as it stands now (another replica may have changed it): a fresh
        # copy each time, so nothing is kept whatever ``cache`` says.
        current = task if as_read else self._record(self._fields(task.id)) or task
        return current.to_json(history_length, artifacts, cache=False)

    # --- events ----------------------------------------------------------

    @_guarded
    def events(self, task_id, after, timeout):
        if len(task_id) > MAX_ID_BYTES or self.conn.closed.is_set():
            return [], False
        self.conn.start_feed()
        return self.conn.feed.events(task_id, after, timeout, self._read_events)

    def _read_events(self, task_id: str, after: int) -> tuple[list, bool]:
        """The task's events after position ``after`` and whether its log exists: one
        round trip (the feed's read, for one stream or for all of a task's), which marks
        the task watched: its next events are announced (``redis_scripts.READ``)."""
        key, start, now = events_key(task_id), f"{after + 1}-0", time.monotonic()
        if now - self._marked.get(task_id, -REWATCH_SECS) < REWATCH_SECS:
            entries, exists = self._command.several(("XRANGE", key, start, "+"),
                                                    ("EXISTS", key))
        else:                   # marked by this process long enough ago: marked again
            entries, exists = self._scripts["READ"](keys=[task_key(task_id), key],
                                                    args=[start, WATCH_MS])
            self._marked[task_id] = now
        # NOTE: a raw reply: each entry is [id, [field, value, …]].
        return self._filled(task_id, [
            StoredEvent(int(entry_id.split("-", 1)[0]), *_payload_and_end(fields))
            for entry_id, fields in entries]), bool(exists)

    def _filled(self, task_id: str, events: list) -> list:
        """``events`` with a refused task's first event read from its record's wire form
        (left out when the record has just been forgotten)."""
        if events and events[0].payload == "":
            wire = self._redis.hget(task_key(task_id), "wire")
            if wire is None:
                return events[1:]
            events[0] = StoredEvent(events[0].seq, task_event(wire), events[0].terminal)
        return events

    @_guarded
    def keep_watching(self):
        """Renew the watch of every task a stream of this process reads (the replica's turn):
        the scripts announce a task's events while it is watched (``redis_scripts``)."""
        reading = set(self.conn.feed.reading())
        for task_id in list(self._marked):
            if task_id not in reading:
                self._marked.pop(task_id, None)     # no stream here reads it any more
        now = time.monotonic()
        for task_id in reading:
            if now - self._marked.get(task_id, -REWATCH_SECS) >= REWATCH_SECS:
                self._scripts["WATCH"](keys=[task_key(task_id)], args=[WATCH_MS])
                self._marked[task_id] = now

    @_guarded
    def final_event(self, task_id):
        if len(task_id) > MAX_ID_BYTES:
            return None
        for _, fields in self._redis.xrevrange(events_key(task_id), "+", "-", count=1):
            if fields.get("t") == "1":
                filled = self._filled(task_id, [StoredEvent(1, fields["p"], True)])
                return filled[0].payload if filled else None
        return None

    @_guarded
    def has_events(self, task_id):
        return len(task_id) <= MAX_ID_BYTES and bool(self._redis.exists(events_key(task_id)))

    # --- cancel marks ----------------------------------------------------

    @_guarded
    def mark_cancel(self, task_id):
        self._scripts["MARK"](keys=[task_key(task_id), mark_key(task_id)],
                              args=[CHANNEL, task_id, MARK_TTL_MS])

    @_guarded
    def cancel_marked(self, task_id):
        return bool(self._redis.exists(mark_key(task_id)))

    # --- lifetime --------------------------------------------------------

    # --- retention -------------------------------------------------------

    @_guarded
    def expire_finished(self):
        for key in self._redis.scan_iter(match=done_key("*"), count=1000):
            keep, cap, batch = self._kept(key[len(done_key("")):])
            while self._scripts["RETAIN"](keys=[key], args=[PREFIX, cap, keep, batch]) >= batch:
                pass                      # NOTE: each call a batch, so Redis serves others

    @_guarded
    def list(self, tenant, agent, *, context_id=None, state=None, after_ms=None, page_size=50,
             token=None):
        return self._index.list(tenant, agent, context_id=context_id, state=state,
                                after_ms=after_ms, page_size=page_size, token=token)

    @_guarded
    def context_tasks(self, tenant, agent, context_id, limit):
        return self._load(self._redis.zrange(index_key(tenant, agent, context_id), -limit, -1))

    def close(self):
        self.conn.close()
