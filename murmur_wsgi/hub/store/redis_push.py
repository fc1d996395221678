"""Push configs and delivery leases on Redis (push_base.py's contract, across replicas).

Each step is one Lua script (``redis_push_scripts``; the key layout is in
docs/hub.md): a save checks the task's count of configs and sets the cursor
from the task's event count; a lease is set-if-absent with a 60 s expiry,
renewed by every advance, and counts only while its holder's liveness key
lives, so a SIGKILLed replica's configs (and its tenant slots) are taken
over as soon as its liveness expires. Deliveries are driven from Redis, not
from memory: ``push_due`` reads ``push:active`` and, when nothing is due,
waits in one blocking XREAD on the event streams of the caught-up configs
and on ``push:wake``, so an event written by any replica (the stale sweep's
FAILED included) wakes the dispatchers of every live replica.

The lease's owner is the connection's ``replica`` id (the dispatcher's owner
on Redis). A config's hash expires with its task's event stream.
"""
from __future__ import annotations

import json
import logging
import time

from murmur_wsgi.hub.store import redis_push_scripts as scripts
from murmur_wsgi.hub.store.push_base import (LEASE_SECS, MAX_CONFIGS_PER_TASK, MAX_FAILURES,
                                             TENANT_DELIVERIES, PushRecord, PushStorage)
from murmur_wsgi.hub.store.redis import MAX_ID_BYTES
from murmur_wsgi.hub.store.redis_client import guarded as _guarded
from murmur_wsgi.hub.store.redis_cluster import FAILURES
from murmur_wsgi.hub.store.redis_keys import (PREFIX, PUSH_ACTIVE, PUSH_COUNTER, PUSH_WAKE,
                                              configs_key, events_key, lease_key, slots_key,
                                              task_key)
from murmur_wsgi.wire.encode import compact_utf8 as _dumps
from murmur_wsgi.wire.task import now_ms

logger = logging.getLogger(__name__)

LEASE_MS = int(LEASE_SECS * 1000)
FULL_SCAN_SECS = 1.0           # how often a waiting dispatcher looks at every active config
WAKE_BATCH = 32                # push:wake entries read at once (more: a full scan)


def _member(task_id: str, config_id: str) -> str:
    return f"{task_id}/{config_id}"


def _record(task_id: str, config_id: str, raw: str) -> PushRecord:
    fields = json.loads(raw)
    disabled_ms = fields.get("disabledMs")
    return PushRecord(fields["tenant"], fields["agent"], task_id, config_id, fields["url"],
                      fields.get("token"), cursor=int(fields["cursor"]),
                      failures=int(fields["failures"]), disabled=bool(fields["disabled"]),
                      disabled_ms=None if disabled_ms is None else int(disabled_ms),
                      last_error=fields.get("lastError"), generation=int(fields["gen"]),
                      created=int(fields["created"]))


class _Waiting:
    """What the dispatcher's ``push_due`` keeps between calls (its thread's only)."""

    def __init__(self):
        self.wake: str | None = None           # push:wake's last id seen
        self.waiting: dict[str, int] = {}      # member -> the event after which to wake
        self.candidates: set[str] = set()      # members to look at again
        self.skip: frozenset = frozenset()     # the last call's skip (members' keys)
        self.full_at = 0.0                     # monotonic time of the next full scan


class RedisPushStore(PushStorage):
    """Push configs on the Redis store's connection (``redis_client.RedisConnection``)."""

    def __init__(self, conn):
        self.conn = conn
        self.replica = conn.replica
        self._redis = conn.redis
        self._closed = conn.closed
        self._block = conn.block
        self._push_wait = _Waiting()
        self._scripts = {name: self._redis.register_script(getattr(scripts, name))
                         for name in ("DUE", "LEASE", "RELEASE", "ADVANCE")}
        # A config's save and delete are acknowledged: the replicas hold them (WAIT).
        self._scripts.update({name: conn.command.script(getattr(scripts, name), durable=True)
                              for name in ("SAVE", "DELETE")})

    @_guarded
    def push_save(self, record, from_start):
        raw = _dumps({"tenant": record.tenant, "agent": record.agent, "url": record.url,
                      "token": record.token})
        task_id = record.task_id
        out = self._scripts["SAVE"](
            keys=[configs_key(task_id), task_key(task_id), PUSH_COUNTER, PUSH_ACTIVE,
                  events_key(task_id), PUSH_WAKE],
            args=[record.id, raw, "1" if from_start else "0", MAX_CONFIGS_PER_TASK,
                  _member(task_id, record.id)])
        return None if out is None else _record(task_id, record.id, out)

    @_guarded
    def push_get(self, tenant, agent, task_id, config_id):
        if len(task_id) > MAX_ID_BYTES:
            return None
        raw = self._redis.hget(configs_key(task_id), config_id)
        if raw is None:
            return None
        found = _record(task_id, config_id, raw)
        return found if (found.tenant, found.agent) == (tenant, agent) else None

    @_guarded
    def push_list(self, tenant, agent, task_id):
        if len(task_id) > MAX_ID_BYTES:
            return []
        records = [_record(task_id, config_id, raw)
                   for config_id, raw in self._redis.hgetall(configs_key(task_id)).items()]
        return sorted((r for r in records if (r.tenant, r.agent) == (tenant, agent)),
                      key=lambda r: r.created)

    @_guarded
    def push_delete(self, tenant, agent, task_id, config_id):
        if len(task_id) > MAX_ID_BYTES:
            return False
        member = _member(task_id, config_id)
        return bool(self._scripts["DELETE"](
            keys=[configs_key(task_id), PUSH_ACTIVE, lease_key(member), slots_key(tenant),
                  PUSH_WAKE],
            args=[config_id, tenant, agent, member]))

    def _push_due_once(self, owner, skip, members=()) -> tuple:
        """(wake's last id, due records, {member: event to wait after}); ``members`` only,
        or all of ``push:active``."""
        skipped = [_member(*key) for key in skip]
        wake, due, waiting = self._scripts["DUE"](
            keys=[PUSH_ACTIVE, PUSH_WAKE], args=[PREFIX, owner, len(skipped), *skipped, *members])
        records = []
        for member, raw in due:
            task_id, _, config_id = member.rpartition("/")
            records.append(_record(task_id, config_id, raw))
        return wake, records, {member: int(n) for member, n in waiting}

    @_guarded
    def push_due(self, owner, timeout, skip=frozenset()):
        # NOTE: a full scan of push:active at most every FULL_SCAN_SECS (and whenever
        # ``timeout`` is 0); otherwise only the configs something woke: a followed stream's
        # new event, a push:wake entry naming a config (saved, deleted, released anywhere),
        # or one that left ``skip`` since the last call (delivered here, or no longer
        # blocked); a wake-up for a skipped config returns [] at once, so the dispatcher
        # retries the configs it found blocked. So a streamed run, or a delivery, costs its
        # own configs, not every active one. Only the dispatcher's loop waits here
        # (timeout > 0); the state below is its own.
        if timeout <= 0:
            return self._push_due_once(owner, skip)[1]
        now = time.monotonic()
        state = self._push_wait
        left_skip = state.skip - set(skip)
        state.skip = frozenset(skip)
        if state.wake is None or now >= state.full_at:
            state.wake, due, state.waiting = self._push_due_once(owner, skip)
            state.full_at, state.candidates = now + FULL_SCAN_SECS, set()
        else:
            state.candidates.update(_member(*key) for key in left_skip)
            due = self._push_look(state, owner, skip)
        deadline = now + timeout
        while not due and not self._closed.is_set():
            left = min(deadline, state.full_at) - time.monotonic()
            if left <= 0:
                return []
            streams = {PUSH_WAKE: state.wake}
            for member, after in state.waiting.items():
                key = events_key(member.rpartition("/")[0])
                if key not in streams or int(streams[key].split("-")[0]) > after:
                    streams[key] = f"{after}-1"
            got = self._redis.xread(streams, count=WAKE_BATCH,
                                    block=max(1, int(min(left, self._block) * 1000)))
            for key, entries in (got.items() if isinstance(got, dict) else got or []):
                if key == PUSH_WAKE:
                    state.wake = entries[-1][0]
                    state.candidates.update(fields["m"] for _, fields in entries
                                            if "m" in fields)
                    if len(entries) >= WAKE_BATCH or any("m" not in f for _, f in entries):
                        state.full_at = 0.0            # too many, or notify_push: all of them
                else:
                    state.candidates.update(m for m in state.waiting
                                            if events_key(m.rpartition("/")[0]) == key)
            if state.full_at == 0.0:
                return []                              # the next call scans them all
            if any(_member(*key) in state.candidates for key in skip):
                return []      # one the dispatcher skips moved: let it reconsider its skip
            due = self._push_look(state, owner, skip)
        return due

    def _push_look(self, state, owner, skip) -> list:
        """Look again at ``state.candidates`` only (then none are left)."""
        members = sorted(state.candidates)
        state.candidates = set()
        if not members:
            return []
        _, due, again = self._push_due_once(owner, skip, members)
        for member in members:
            state.waiting.pop(member, None)
        state.waiting.update(again)
        return due

    def notify_push(self):
        try:
            self._redis.xadd(PUSH_WAKE, {"w": "n"}, maxlen=scripts.WAKE_LEN, approximate=True)
        except FAILURES as ex:
            logger.warning("redis store: notify_push failed: %s", type(ex).__name__)

    @_guarded
    def push_lease(self, record, owner):
        member = _member(*record.key)
        return bool(self._scripts["LEASE"](
            keys=[lease_key(member), slots_key(record.tenant)],
            args=[owner, LEASE_MS, member, TENANT_DELIVERIES, PREFIX]))

    def push_release(self, record, owner):
        # NOTE: never raises: the dispatcher releases in a ``finally``; a lease Redis did not
        # hear given back expires by itself (LEASE_SECS, or at once when this replica dies).
        member = _member(*record.key)
        try:
            self._scripts["RELEASE"](
                keys=[lease_key(member), slots_key(record.tenant), PUSH_WAKE],
                args=[owner, member])
        except FAILURES as ex:
            logger.warning("redis store: push_release failed: %s", type(ex).__name__)

    @_guarded
    def push_advance(self, record, owner, seq, outcome, error=None):
        member = _member(*record.key)
        out = self._scripts["ADVANCE"](
            keys=[configs_key(record.task_id), lease_key(member), slots_key(record.tenant)],
            args=[record.id, record.generation, owner, seq, outcome, error or "", LEASE_MS,
                  member, MAX_FAILURES, now_ms()])
        return None if out is None else _record(record.task_id, record.id, out)
