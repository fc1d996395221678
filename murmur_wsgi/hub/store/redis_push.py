"""Push configs and delivery leases on Redis (push/storage.py's contract, across replicas).

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

The lease's owner is the store's ``replica`` id (the dispatcher's owner on
Redis). A config's hash expires with its task's event stream.
"""
from __future__ import annotations

import json
import logging

import redis

from murmur_wsgi.hub.push.storage import (LEASE_SECS, MAX_CONFIGS_PER_TASK, MAX_FAILURES,
                                          TENANT_DELIVERIES, PushRecord, PushStorage)
from murmur_wsgi.hub.store import redis_push_scripts as scripts
from murmur_wsgi.hub.store.redis import MAX_ID_BYTES, PREFIX, RedisStore, _guarded
from murmur_wsgi.wire.task import now_ms

logger = logging.getLogger(__name__)

LEASE_MS = int(LEASE_SECS * 1000)
ACTIVE = PREFIX + "push:active"
WAKE = PREFIX + "push:wake"
COUNTER = PREFIX + "push:n"
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _member(task_id: str, config_id: str) -> str:
    return f"{task_id}/{config_id}"


def _configs_key(task_id: str) -> str:
    return f"{PREFIX}push:{task_id}"


def _lease_key(member: str) -> str:
    return f"{PREFIX}push:lease:{member}"


def _slots_key(tenant: str) -> str:
    return f"{PREFIX}push:slots:{tenant}"


def _record(task_id: str, config_id: str, raw: str) -> PushRecord:
    fields = json.loads(raw)
    disabled_ms = fields.get("disabledMs")
    return PushRecord(fields["tenant"], fields["agent"], task_id, config_id, fields["url"],
                      fields.get("token"), cursor=int(fields["cursor"]),
                      failures=int(fields["failures"]), disabled=bool(fields["disabled"]),
                      disabled_ms=None if disabled_ms is None else int(disabled_ms),
                      last_error=fields.get("lastError"), generation=int(fields["gen"]),
                      created=int(fields["created"]))


class RedisPushStorage(PushStorage):
    """A mixin of ``RedisStore`` (``RedisPushStore``): its client, prefix and liveness."""

    def _push_scripts(self) -> dict:
        found = getattr(self, "_push_registered", None)
        if found is None:
            found = self._push_registered = {
                name: self._redis.register_script(getattr(scripts, name))
                for name in ("SAVE", "DELETE", "DUE", "LEASE", "RELEASE", "ADVANCE")}
        return found

    @_guarded
    def push_save(self, record, from_start):
        raw = _dumps({"tenant": record.tenant, "agent": record.agent, "url": record.url,
                      "token": record.token})
        task_id = record.task_id
        out = self._push_scripts()["SAVE"](
            keys=[_configs_key(task_id), self._task_key(task_id), COUNTER, ACTIVE,
                  self._events_key(task_id), WAKE],
            args=[record.id, raw, "1" if from_start else "0", MAX_CONFIGS_PER_TASK,
                  _member(task_id, record.id)])
        return None if out is None else _record(task_id, record.id, out)

    @_guarded
    def push_get(self, tenant, agent, task_id, config_id):
        if len(task_id) > MAX_ID_BYTES:
            return None
        raw = self._redis.hget(_configs_key(task_id), config_id)
        if raw is None:
            return None
        found = _record(task_id, config_id, raw)
        return found if (found.tenant, found.agent) == (tenant, agent) else None

    @_guarded
    def push_list(self, tenant, agent, task_id):
        if len(task_id) > MAX_ID_BYTES:
            return []
        records = [_record(task_id, config_id, raw)
                   for config_id, raw in self._redis.hgetall(_configs_key(task_id)).items()]
        return sorted((r for r in records if (r.tenant, r.agent) == (tenant, agent)),
                      key=lambda r: r.created)

    @_guarded
    def push_delete(self, tenant, agent, task_id, config_id):
        if len(task_id) > MAX_ID_BYTES:
            return False
        member = _member(task_id, config_id)
        return bool(self._push_scripts()["DELETE"](
            keys=[_configs_key(task_id), ACTIVE, _lease_key(member), _slots_key(tenant), WAKE],
            args=[config_id, tenant, agent, member]))

    def _push_due_once(self, skip) -> tuple:
        wake, due, waiting = self._push_scripts()["DUE"](
            keys=[ACTIVE, WAKE], args=[PREFIX, *(_member(*key) for key in skip)])
        records = []
        for member, raw in due:
            task_id, _, config_id = member.rpartition("/")
            records.append(_record(task_id, config_id, raw))
        return wake, records, waiting

    @_guarded
    def push_due(self, owner, timeout, skip=frozenset()):
        wake, due, waiting = self._push_due_once(skip)
        if due or timeout <= 0 or self._closed.is_set():
            return due
        streams = {WAKE: wake}
        for member, cursor in waiting:
            task_id = member.rpartition("/")[0]
            key = self._events_key(task_id)
            mark = f"{int(cursor)}-1"
            if key not in streams or int(streams[key].split("-")[0]) > int(cursor):
                streams[key] = mark
        block = max(1, int(min(timeout, self._block) * 1000))
        self._redis.xread(streams, count=1, block=block)
        return self._push_due_once(skip)[1]

    def notify_push(self):
        try:
            self._redis.xadd(WAKE, {"w": "n"}, maxlen=scripts.WAKE_LEN, approximate=True)
        except redis.RedisError as ex:
            logger.warning("redis store: notify_push failed: %s", type(ex).__name__)

    @_guarded
    def push_lease(self, record, owner):
        member = _member(*record.key)
        return bool(self._push_scripts()["LEASE"](
            keys=[_lease_key(member), _slots_key(record.tenant)],
            args=[owner, LEASE_MS, member, TENANT_DELIVERIES, PREFIX]))

    def push_release(self, record, owner):
        # NOTE: never raises: the dispatcher releases in a ``finally``; a lease Redis did not
        # hear given back expires by itself (LEASE_SECS, or at once when this replica dies).
        member = _member(*record.key)
        try:
            self._push_scripts()["RELEASE"](
                keys=[_lease_key(member), _slots_key(record.tenant), WAKE],
                args=[owner, member])
        except redis.RedisError as ex:
            logger.warning("redis store: push_release failed: %s", type(ex).__name__)

    @_guarded
    def push_advance(self, record, owner, seq, outcome, error=None):
        member = _member(*record.key)
        out = self._push_scripts()["ADVANCE"](
            keys=[_configs_key(record.task_id), _lease_key(member), _slots_key(record.tenant)],
            args=[record.id, record.generation, owner, seq, outcome, error or "", LEASE_MS,
                  member, MAX_FAILURES, now_ms()])
        return None if out is None else _record(record.task_id, record.id, out)


class RedisPushStore(RedisPushStorage, RedisStore):
    """The Redis store with push configs (what ``open_store`` opens for a Redis URL)."""
