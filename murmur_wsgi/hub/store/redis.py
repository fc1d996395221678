"""The Redis store (``store: redis://host:port/db``): every replica of a hub shares it.

The key layout (every key starts with ``murmur:hub:``) is in docs/hub.md
(ListTasks' sorted sets: ``redis_index``);
each step that must be atomic (create, start, append, end, the cancel mark,
a claim's release) is one Lua script (``redis_scripts``), so a task has
exactly one final state and no event follows it. Every event written is
announced on a channel, and one thread per store (``redis_feed.EventFeed``)
listens to it for every stream of the worker: a waiting stream costs no Redis
command, an event one read per worker that streams its task. Cancel marks are
published on a channel of their own, listened to on the same connection.

Failures: every ``redis.RedisError`` is raised as ``StoreError``, whose
message is public (``redis_client``). Admission's counters, shared by every
replica, are ``redis_limits``.

Concurrency:
    The redis-py client and its pool are thread-safe; nothing here is shared
    between threads but ``_contexts`` (a cache of the context ids of the tasks
    this replica created, guarded by the GIL's atomic dict operations) and
    ``_closed`` (an Event).
"""
from __future__ import annotations

import json
import logging
import threading
import uuid

import redis

from murmur_wsgi.hub.store import redis_scripts as scripts
from murmur_wsgi.hub.store.base import PENDING, Page, Store, StoreError, StoredEvent
from murmur_wsgi.hub.store.redis_client import PREFIX, Commands, connect, public_url
from murmur_wsgi.hub.store.redis_index import RedisIndex
from murmur_wsgi.hub.store.redis_client import guarded as _guarded
from murmur_wsgi.hub.store.redis_feed import EventFeed
from murmur_wsgi.hub.store.redis_limits import RedisCounters
from murmur_wsgi.hub.task import FAILED, TERMINAL, WORKING, HubTask, status_update, task_status
from murmur_wsgi.wire import task as wire_task
from murmur_wsgi.wire.encode import compact_utf8 as _dumps
from murmur_wsgi.wire.task import now_ms

logger = logging.getLogger(__name__)

CHANNEL = PREFIX + "cancel"
CLAIM_TTL_MS = 60_000            # a claim whose replica died before its task was created
MARK_TTL_MS = 3_600_000          # a cancel mark outlives any run it could reach
BLOCK_MAX_SECS = 1.0             # the longest wait of a listener between two looks
MAX_ID_BYTES = 256               # a task id longer than this names no task
# What a read of one record asks for (one HMGET, its owner first): a finished task's
# wire form, else what rebuilds it (``_record``).
RECORD_FIELDS = ("tenant", "agent", "wire", "id", "ctx", "msg", "state", "text", "ms",
                 "created", "seq", "hist", "arts")


def _payload_and_end(fields: list) -> tuple[str, bool]:
    """An event entry's raw fields (``p`` its payload, ``t`` "1" when it is the last)."""
    found = dict(zip(fields[::2], fields[1::2]))
    return found["p"], found["t"] == "1"


class RedisStore(RedisIndex, Store):
    """Tasks, their index, events, claims, cancel marks and liveness, in one Redis."""

    shared = True

    def __init__(self, url: str, *, retention_secs: float = 86_400.0, timeout_secs: float = 5.0,
                 liveness_secs: float = 10.0, max_events: int = 10_000,
                 replica_id: str | None = None):
        self.url = public_url(url)
        self.replica = replica_id or uuid.uuid4().hex
        self._retention_ms = int(retention_secs * 1000)
        self._liveness_ms = max(1, int(liveness_secs * 1000))
        self._max_events = max_events
        self._block = min(BLOCK_MAX_SECS, timeout_secs / 2)
        self._redis = connect(url, timeout_secs)
        self._command = Commands(self._redis)     # the hot paths, on connections of their own
        self._scripts = {name: self._command.script(getattr(scripts, name))
                         for name in ("CREATE", "START", "APPEND", "END", "RELEASE", "MARK")}
        self._contexts: dict[str, str] = {}
        self._closed = threading.Event()
        self._feed = EventFeed(self._redis, self._read_events, scripts.EVENTS_CHANNEL,
                               block_secs=self._block, stall_secs=timeout_secs)
        self._feed.also(CHANNEL, self._cancelled)
        self._on_cancel = None
        self._feed_lock = threading.Lock()
        self._feed_started = False

    # --- keys --------------------------------------------------------------

    @staticmethod
    def _task_key(task_id: str) -> str:
        return f"{PREFIX}task:{task_id}"

    @staticmethod
    def _events_key(task_id: str) -> str:
        return f"{PREFIX}ev:{task_id}"

    @staticmethod
    def _msg_key(tenant: str, agent: str, message_id: str) -> str:
        return f"{PREFIX}msg:{tenant}:{agent}:{message_id}"

    @staticmethod
    def _runs_key(replica: str) -> str:
        return f"{PREFIX}runs:{replica}"

    @staticmethod
    def _live_key(replica: str) -> str:
        return f"{PREFIX}replica:{replica}"

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

    def _each_task(self, task_ids: list, read) -> list:
        """``read(pipe, task_id)`` for every task, in one round trip: the answers, in order."""
        pipe = self._redis.pipeline(transaction=False)
        for task_id in task_ids:
            read(pipe, task_id)
        return pipe.execute()

    def _load(self, task_ids: list) -> list:
        records = self._each_task(task_ids, lambda pipe, t: pipe.hgetall(self._task_key(t)))
        return [task for task in map(self._record, records) if task is not None]

    def _context_of(self, task_id: str) -> str:
        context_id = self._contexts.get(task_id)
        if context_id is None:
            context_id = self._redis.hget(self._task_key(task_id), "ctx") or ""
        return context_id

    # --- idempotency -------------------------------------------------------

    @_guarded
    def claim_message(self, tenant, agent, message_id):
        key = self._msg_key(tenant, agent, message_id)
        for _ in range(3):
            if self._command("SET", key, PENDING, "NX", "PX", CLAIM_TTL_MS):
                return None
            found = self._command("GET", key)
            if found is not None:
                return found
        return PENDING        # claimed and released twice meanwhile: someone is at it

    @_guarded
    def release_message(self, tenant, agent, message_id):
        self._scripts["RELEASE"](keys=[self._msg_key(tenant, agent, message_id)])

    # --- tasks -----------------------------------------------------------

    @_guarded
    def create(self, task, event, bind=True):
        keys = [self._task_key(task.id), self._index_key(task.tenant, task.agent),
                self._index_key(task.tenant, task.agent, task.context_id),
                f"{PREFIX}seq:{task.tenant}:{task.agent}",
                self._msg_key(task.tenant, task.agent, task.message_id),
                self._events_key(task.id), self._runs_key(self.replica), f"{PREFIX}replicas",
                self._state_key(task.tenant, task.agent, task.state),
                self._updated_key(task.tenant, task.agent)]
        args = [task.id, task.context_id, task.tenant, task.agent, task.message_id, task.state,
                _dumps(task.status_text), task.status_ms, task.created_ms,
                _dumps(task.history), _dumps(task.artifacts), self.replica,
                "1" if bind else "0", event, "1" if task.terminal else "0",
                self._retention_ms, task.to_json(cache=False) if task.terminal else ""]
        task.seq = int(self._scripts["CREATE"](keys=keys, args=args))
        if not task.terminal:
            self._contexts[task.id] = task.context_id

    def _fields(self, task_id: str, tenant: str | None = None,
                agent: str | None = None) -> dict | None:
        """The record's fields (one ``HMGET``), None unless it is ``tenant``'s ``agent``'s
        (when named) and exists."""
        if len(task_id) > MAX_ID_BYTES:
            return None
        values = self._command("HMGET", self._task_key(task_id), *RECORD_FIELDS)
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
        done = self._scripts["START"](keys=[self._task_key(task_id), self._events_key(task_id)],
                                      args=[ms, payload, self._max_events, PREFIX])
        return payload if done else None

    @_guarded
    def append(self, task_id, event):
        return bool(self._scripts["APPEND"](
            keys=[self._task_key(task_id), self._events_key(task_id)],
            args=[event, self._max_events]))

    @_guarded
    def end(self, task_id, state, text, artifacts, events):
        ms = now_ms()
        context_id = self._context_of(task_id)
        status = task_status(task_id, context_id, state, text, ms)
        written = list(events) + [status_update(task_id, context_id, status)]
        # The finished task's wire form up to its artifacts: the script completes it.
        head = _dumps(wire_task.task(task_id, context_id, status))[:-1]
        done = self._scripts["END"](
            keys=[self._task_key(task_id), self._events_key(task_id)],
            args=[state, _dumps(text), ms, "" if artifacts is None else _dumps(artifacts),
                  self._retention_ms, self._max_events, PREFIX, head, *written])
        self._contexts.pop(task_id, None)
        return written if done else None

    @_guarded
    def render(self, task, history_length=None, artifacts=True, cache=True, as_read=False):
        # NOTE: the record as it stands now (another replica may have changed it): a fresh
        # copy each time, so nothing is kept whatever ``cache`` says.
        current = task if as_read else self._record(self._fields(task.id)) or task
        return current.to_json(history_length, artifacts, cache=False)

    # --- events ----------------------------------------------------------

    @staticmethod
    def _stored(entries) -> list:
        return [StoredEvent(int(entry_id.split("-", 1)[0]), fields["p"], fields["t"] == "1")
                for entry_id, fields in entries]

    @_guarded
    def events(self, task_id, after, timeout):
        if len(task_id) > MAX_ID_BYTES or self._closed.is_set():
            return [], False
        self._start_feed()
        return self._feed.events(task_id, after, timeout)

    def _read_events(self, task_id: str, after: int) -> tuple[list, bool]:
        """The task's events after position ``after`` and whether its log exists: one
        round trip (the feed's read, for one stream or for all of a task's)."""
        key = self._events_key(task_id)
        entries, exists = self._command.several(("XRANGE", key, f"{after + 1}-0", "+"),
                                                ("EXISTS", key))
        # NOTE: a raw reply: each entry is [id, [field, value, …]].
        return [StoredEvent(int(entry_id.split("-", 1)[0]), *_payload_and_end(fields))
                for entry_id, fields in entries], bool(exists)

    @_guarded
    def final_event(self, task_id):
        if len(task_id) > MAX_ID_BYTES:
            return None
        for _, fields in self._redis.xrevrange(self._events_key(task_id), "+", "-", count=1):
            if fields.get("t") == "1":
                return fields["p"]
        return None

    @_guarded
    def has_events(self, task_id):
        return len(task_id) <= MAX_ID_BYTES and bool(self._redis.exists(self._events_key(task_id)))

    # --- cancel marks ----------------------------------------------------

    @_guarded
    def mark_cancel(self, task_id):
        self._scripts["MARK"](keys=[self._task_key(task_id), f"{PREFIX}cancel:{task_id}"],
                              args=[CHANNEL, task_id, MARK_TTL_MS])

    @_guarded
    def cancel_marked(self, task_id):
        return bool(self._redis.exists(f"{PREFIX}cancel:{task_id}"))

    @_guarded
    def cancel_marks(self, task_ids):
        hits = self._each_task(task_ids, lambda pipe, t: pipe.exists(f"{PREFIX}cancel:{t}"))
        return {task_id for task_id, hit in zip(task_ids, hits) if hit}

    @_guarded
    def ended_of(self, task_ids):
        states = self._each_task(task_ids, lambda pipe, t: pipe.hget(self._task_key(t), "state"))
        return {task_id for task_id, state in zip(task_ids, states) if state in TERMINAL}

    def listen_cancels(self, callback):
        """The cancel channel's messages to ``callback``, on the event feed's connection
        and thread (one listener per store); it reconnects while the store is open."""
        self._on_cancel = callback
        self._start_feed()

    def _cancelled(self, task_id: str) -> None:
        if self._on_cancel is not None:
            self._on_cancel(task_id)

    def _start_feed(self) -> None:
        if self._feed_started:
            return
        with self._feed_lock:
            if not self._feed_started and not self._closed.is_set():
                self._feed.start()
                self._feed_started = True

    # --- replicas ----------------------------------------------------------

    def counters(self):
        return RedisCounters(self._redis, self._command, PREFIX, self._liveness_ms)

    @_guarded
    def heartbeat(self):
        self._redis.set(self._live_key(self.replica), str(now_ms()), px=self._liveness_ms)

    @_guarded
    def sweep(self, max_age_secs, text):
        replicas = sorted(self._redis.smembers(f"{PREFIX}replicas"))
        if not replicas:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for replica in replicas:
            pipe.exists(self._live_key(replica))
        alive = pipe.execute()
        oldest = now_ms() - int(max_age_secs * 1000)
        ended = []
        for replica, live in zip(replicas, alive):
            runs = self._runs_key(replica)
            ids = self._redis.zrangebyscore(runs, "-inf", oldest) if live else \
                self._redis.zrange(runs, 0, -1)
            for task_id in ids:
                if self.end(task_id, FAILED, text, None, []) is not None:
                    ended.append(task_id)
                    # NOTE: a replica taken for dead may still run it: told at once, it ends
                    # its run and the sender's own stream with this end.
                    self._redis.publish(CHANNEL, task_id)
                self._redis.zrem(runs, task_id)
            if not live and not self._redis.zcard(runs):
                self._redis.srem(f"{PREFIX}replicas", replica)
        return ended

    # --- lifetime --------------------------------------------------------

    def close(self):
        if self._closed.is_set():
            return
        self._closed.set()
        self._feed.close()
        try:
            self._redis.delete(self._live_key(self.replica))
        except redis.RedisError:
            pass
        # NOTE: the feed's listener is not joined: it ends within BLOCK_MAX_SECS by itself,
        # or at once when the pool's disconnect below closes its connection.
        self._command.close()
        self._redis.close()
        self._redis.connection_pool.disconnect()

