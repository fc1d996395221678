"""The Redis task store (``store: redis://host:port/db``): every replica of a hub shares it.

The key layout (a tenant's keys in its own slot, the hub's in ``{hub}``'s; names
in ``redis_keys``) is in docs/hub.md (ListTasks' sorted sets: ``redis_index``);
each step that must be atomic (a message's acceptance: claim, admission,
creation and start; create, start, append, end, the cancel mark, a claim's
release, forgetting finished tasks) is one Lua script (``redis_scripts``) on the
tenant's keys, so a task has exactly one final state and no event follows it.
A task's run is in its replica's runs (``runs:<replica>``, the hub's slot) from its
task's creation (a message's acceptance, ``redis_accept``; before a non-final CREATE it
is sent first) and leaves them after its end (``settle_runs`` at the replica's next
turn, ``flush_runs`` at its next beat): the sweep ends what a dead replica's runs still
list, and a run listed whose task had ended, or never came to be, is dropped as it is met. Every event written is
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

Every method that names a task by id alone (``start``, ``append``, ``end``,
``events``, ``final_event``, ``has_events``, ``mark_cancel``, ``cancel_marked``)
takes its ``tenant`` (the task's keys are in its tenant's slot); without one, a
task this replica created and still runs is known (``_names``), and so are the
last ``RECENT`` it ended (``_recent``); any other is not found.

Concurrency:
    The redis-py client and its pool are thread-safe; nothing here is shared
    between threads but ``_names`` (the tenant, agent and context of the tasks
    this replica created and runs), ``_recent`` (the same of those it ended),
    ``_left``, ``_settled`` and ``_unended`` (runs to take out of this replica's runs:
    ``redis_runs``), ``_marked`` (when it last marked a task its streams read, and the
    task's tenant), each changed by the GIL's atomic dict and list operations, and the
    connection's ``closed`` (an Event).
"""
from __future__ import annotations

import collections
import logging

from murmur_wsgi.hub.store import redis_scripts as scripts
from murmur_wsgi.hub.store.large_reads import MAX_BYTES, LargeReads
from murmur_wsgi.hub.store.base import PENDING, TaskStore, Written
from murmur_wsgi.hub.store.redis_client import guarded as _guarded
from murmur_wsgi.hub.store.redis_commands import script_sha, short
from murmur_wsgi.hub.store.redis_events import TaskEvents
from murmur_wsgi.hub.store.redis_index import RedisIndex
from murmur_wsgi.hub.store.redis_reads import MAX_ID_BYTES, RecordReads
from murmur_wsgi.hub.store.redis_keys import (REPLICAS, both_key, events_key, index_key,
                                              member, msg_key, retained_keys, running_key,
                                              runs_key, seq_key, state_key, task_key,
                                              updated_key)
from murmur_wsgi.hub.store.redis_accept import Accepting
from murmur_wsgi.hub.store.redis_retain import Forgetting
from murmur_wsgi.hub.store.redis_runs import LEAVE, RunsLeft
from murmur_wsgi.hub.store.retention import Retention
from murmur_wsgi.hub.task import SUBMITTED, TERMINAL, WORKING, final_texts, started_event
from murmur_wsgi.wire.encode import compact_utf8 as _dumps
from murmur_wsgi.wire.task import now_ms

logger = logging.getLogger(__name__)

CLAIM_TTL_MS = 60_000            # a claim whose replica died before its task was created
RECENT = 4096                    # the tasks ended here whose tenant is kept (id-only calls)
END_PAYLOADS = 18                # the END script's first payload, in ARGV (1-based)
DURABLE = ("OPEN", "CREATE", "START", "APPEND", "END", "MARK")   # acknowledged: redis.wait_replicas


def _text_json(text: str | None) -> str:
    """A status message's text as JSON (PERF: most are None: no encoder is called)."""
    return "null" if text is None else _dumps(text)


class RedisTaskStore(RecordReads, Accepting, TaskEvents, Forgetting, RunsLeft, TaskStore):
    """Tasks, their index, events, claims and cancel marks, in one Redis (``conn``): a
    message's acceptance in ``redis_accept``, the events and marks in ``redis_events``,
    retention in ``redis_retain``, the reads of records in ``redis_reads``, the runs that
    ended leaving this replica's runs in ``redis_runs``."""

    shared = True

    def __init__(self, conn, *, retention_secs: float = 86_400.0, max_events: int = 10_000,
                 retention: Retention | None = None, large_reads: LargeReads | None = None):
        self.conn = conn
        self.replica = conn.replica
        self._redis = conn.redis
        self._accepting_init(conn.cluster)
        self._command = conn.command
        self._block = conn.block
        self._retention_ms = int(retention_secs * 1000)
        self._max_events = max_events
        self._keep = retention or Retention()
        self._kept_of: dict[str, tuple] = {}    # tenant -> (its Retention, ``_kept``'s)
        self._scripts = {name: self._command.script(getattr(scripts, name),
                                                    durable=name in DURABLE)
                         for name in ("OPEN", "CREATE", "START", "APPEND", "END", "RELEASE", "MARK",
                                      "DOOMED", "FORGET", "READ", "WATCH")}
        # A stream's page of a log (``redis_events``), a read-only script: sent as a task's
        # record is (``RecordReads._read_only``).
        self._page = (script_sha(scripts.PAGE), scripts.PAGE)
        self._names: dict[str, tuple] = {}   # a running task's (tenant, agent, context id)
        self._recent: collections.OrderedDict = collections.OrderedDict()   # ended: the same
        self._left: list[str] = []           # runs (members) that ended: to look at
        self._settled: list[str] = []        # … looked at: out of the runs at the next beat
        self._unended: list[str] = []        # … whose task the beat found unended: to end
        self._leaving = self._command.script(LEAVE)
        self._forgetting_init()
        # When this process last marked a task its streams read (watched), and its tenant.
        self._marked: dict[str, tuple] = {}
        self.large_reads = large_reads or LargeReads(MAX_BYTES, 5.0)
        # NOTE: the buffers' large events hold room of their own, as much: kept to be shared,
        # they never take the room a read needs.
        conn.feed.room = LargeReads(self.large_reads.max_bytes, 0.0)
        self._index = RedisIndex(self._redis, self._load, self._sizes, self.large_reads)

    def _kept(self, tenant: str) -> tuple:
        """The retention script's arguments for ``tenant``: retention ms, cap, batch, bytes
        (PERF: worked out once a tenant and ``Retention``, as every message sends them)."""
        keep = self._keep
        found = self._kept_of.get(tenant)
        if found is None or found[0] is not keep:
            secs, cap, max_bytes = keep.of(tenant)
            found = self._kept_of[tenant] = (keep, (int(secs * 1000), cap, keep.batch_of(cap),
                                                    max_bytes))
        return found[1]

    def _names_of(self, task_id: str, tenant: str | None) -> tuple | None:
        """``(tenant, agent, context id)`` of a task: one this replica runs, or ``tenant``'s
        (read from its record); None when unknown."""
        names = self._names.get(task_id) or self._recent.get(task_id)
        if names is not None and tenant in (None, names[0]):
            return names
        if tenant is None or len(task_id) > MAX_ID_BYTES:
            return None
        agent, context_id = self._command("HMGET", task_key(tenant, task_id), "agent", "ctx")
        return None if agent is None else (tenant, agent, context_id)

    def _tenant_of(self, task_id: str, tenant: str | None) -> str | None:
        if tenant is not None:
            return tenant if len(task_id) <= MAX_ID_BYTES else None
        names = self._names.get(task_id) or self._recent.get(task_id)
        return None if names is None else names[0]

    def _running(self, task) -> list:
        """The commands that put ``task``'s run in this replica's runs (before it exists)."""
        return [("ZADD", runs_key(self.replica), task.created_ms, member(task.tenant, task.id)),
                ("SADD", REPLICAS, self.replica)]

    def _ended(self, task_id: str, names: tuple) -> None:
        self._recent[task_id] = names
        while len(self._recent) > RECENT:
            self._recent.popitem(last=False)

    def ended_elsewhere(self, tenant: str, task_id: str) -> None:
        """A run of this replica whose task another replica ended: out of the runs here."""
        if task_id in self._names:
            self._ran(tenant, task_id)

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
        before = self._listing(task.tenant) if task.terminal else self._running(task)
        seq, gone = self._scripts["CREATE"](**self.create_call(task, event, bind),
                                            before=before)
        task.seq = int(seq)
        names = (task.tenant, task.agent, task.context_id)
        if task.terminal:
            self._listed.add(task.tenant)
            self._ended(task.id, names)
        else:
            self._names[task.id] = names
        self._forget_after(task.tenant, gone)

    def create_call(self, task, event: str, bind: bool = True, state: str | None = None,
                    ms: int | None = None) -> dict:
        """The CREATE script's ``keys`` and ``args`` for ``task`` (a pipeline may send many
        finished ones); ``state`` and ``ms``: the record's state and status time, if not
        the task's."""
        return self._create_call(task, event, bind, state, ms)[0]

    def _create_call(self, task, event: str, bind: bool = True, state: str | None = None,
                     ms: int | None = None) -> tuple[dict, tuple]:
        """``create_call``'s, and its arguments of unbounded length (``redis_commands.short``
        measures them): the context id and messageId (its keys hold both), the status text,
        history, artifacts, first event and a finished task's wire form."""
        state = state or task.state
        tenant, agent, context_id = task.tenant, task.agent, task.context_id
        terminal = task.state in TERMINAL
        artifacts = task.contents()[1]
        keys = [task_key(tenant, task.id), index_key(tenant, agent),
                index_key(tenant, agent, context_id), seq_key(tenant, agent),
                msg_key(tenant, agent, task.message_id), events_key(tenant, task.id),
                state_key(tenant, agent, state), updated_key(tenant, agent),
                both_key(tenant, agent, state, context_id), *retained_keys(tenant)]
        # NOTE: a task refused at its creation keeps its message once, in its wire form: its
        # first event is stored as '' and read as {"task": wire} (``_filled``).
        unbounded = (context_id, task.message_id, _text_json(task.status_text),
                     task.history_json(), _dumps(artifacts) if artifacts else "[]",
                     "" if terminal else event, task.to_json(cache=False) if terminal else "")
        text, history, arts, first, wire = unbounded[2:]
        args = [task.id, context_id, tenant, agent, task.message_id, state, text,
                ms or task.status_ms, task.created_ms, history, arts, self.replica,
                "1" if bind else "0", first, "1" if terminal else "0", self._retention_ms,
                wire, *self._kept(tenant)]
        return {"keys": keys, "args": args}, unbounded

    @staticmethod
    def _moves(tenant: str, agent: str, context_id: str, new: str) -> list:
        """A state change's sets: ``st:`` and ``cst:`` of SUBMITTED, WORKING (the states a
        task leaves) and ``new``, then ``upd``."""
        return [state_key(tenant, agent, SUBMITTED), state_key(tenant, agent, WORKING),
                state_key(tenant, agent, new), both_key(tenant, agent, SUBMITTED, context_id),
                both_key(tenant, agent, WORKING, context_id),
                both_key(tenant, agent, new, context_id), updated_key(tenant, agent)]

    @_guarded
    def start(self, task_id, tenant=None):
        names = self._names_of(task_id, tenant)
        if names is None:
            return None
        tenant, agent, context_id = names
        ms = now_ms()
        payload = started_event(task_id, context_id, ms)
        moves = self._moves(tenant, agent, context_id, WORKING)
        done = self._scripts["START"](
            keys=[task_key(tenant, task_id), events_key(tenant, task_id), moves[0], moves[1],
                  moves[3], moves[4], moves[6]],
            args=[ms, payload, self._max_events])
        return payload if done else None

    @_guarded
    def append(self, task_id, event, n=0, tenant=None):
        tenant = self._tenant_of(task_id, tenant)
        if tenant is None:
            return False
        return bool(self._scripts["APPEND"](
            keys=[task_key(tenant, task_id), events_key(tenant, task_id)],
            args=[event, self._max_events, n]))

    @_guarded
    def end(self, task_id, state, text, artifacts, events, numbered=(0, 0), answer=None,
            keep=False, tenant=None):
        names = self._names_of(task_id, tenant)
        if names is None:
            return None
        tenant, agent, context_id = names
        ms = now_ms()
        # The finished task's wire form up to its artifacts (``head``): the script completes it.
        final, head = final_texts(task_id, context_id, state, text, ms)
        written = list(events) + [final]
        if artifacts is None:
            arts = ""
        elif answer is None:
            arts = _dumps(artifacts)
        else:                           # the answer's JSON is sent once, the others apart
            arts = _dumps(artifacts[:-1])[1:-1] if len(artifacts) > 1 else ""
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
        text_json = _text_json(text)
        done = self._scripts["END"](
            keys=[task_key(tenant, task_id), events_key(tenant, task_id),
                  *self._moves(tenant, agent, context_id, state), running_key(tenant),
                  *retained_keys(tenant)],
            args=[state, text_json, ms, arts, self._retention_ms, self._max_events,
                  head, *self._kept(tenant), *numbered, answer or "", at, tail,
                  "1" if keep else "0", *payloads],
            before=self._listing(tenant),
            short=short(context_id, text_json, arts, head, answer or "", tail, *payloads))
        self._listed.add(tenant)
        if task_id in self._names:
            self._ran(tenant, task_id)
        if not done:
            return None
        wire, gone = done
        self._forget_after(tenant, gone)
        return Written(written, wire if keep else None)

    def close(self):
        try:
            self.settle_runs()
            self.flush_runs()
        except Exception:  # noqa: BLE001 - closing: the sweep drops what is left
            pass
        self.conn.close()
