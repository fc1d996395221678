"""Push configs and delivery leases on Redis (push_base.py's contract, across replicas).

Each step on a config is one Lua script on its tenant's keys (``redis_push_scripts``;
the key layout is in docs/hub.md): a save checks the task's count of configs and sets
the cursor from the task's event count; a lease is set-if-absent with a 60 s expiry,
renewed by every advance, and counts only while its holder's liveness key lives, so a
SIGKILLed replica's configs (and its tenant slots) are taken over as soon as its
liveness expires. The liveness keys are the hub's: a script of a tenant's slot cannot
read them, so the caller reads the holders' liveness and tells the script.

Deliveries are driven from Redis, not from memory: ``push_due`` reads each tenant's
``push:active:<tenant>`` (its ``<tenant>/<task>/<config>``, the first listed only:
``redis_push_looks.listed``), looks at each tenant's configs with
one script on that tenant's slot (all of them in one pipeline), and, when nothing is
due, waits for a wake-up on the connection's one listener: an event written to the
task of a config it waits on (the event channel, ``redis_feed``: the look that finds a
config to wait on watches its task, so its events are announced), or a config saved,
deleted or released on any replica (the ``push:wake`` channel). What the listener
misses (not subscribed, reconnecting) a look at every config finds: at once when the
listener is subscribed again (``notify_push``), else at most ``FULL_SCAN_SECS`` later;
while it is not subscribed the waiting configs are looked at again every ``block``
seconds.

A config enters its tenant's list before its save and again after it, and leaves it after
a look found it gone or done (``_unlist``: the name removed, then the config looked at
once more, and put back if it was saved meanwhile), so a config saved is always listed
while it has events to send: a save that comes between a look and its removal (a
client's delete and create of one config) is either seen by the second look or lists
the name after the removal.

The lease's owner is the connection's ``replica`` id (the dispatcher's owner on Redis).
A config's hash expires with its task's event stream.

Concurrency: ``_cond`` (a Condition) guards what the listener's thread tells the
dispatcher's (``_heard``, ``_woken``, ``_every``, ``_watch``, ``_notified``); the
dispatcher's own state (``_Waiting``) is its thread's only.
"""
from __future__ import annotations

import json
import logging
import threading
import time

from murmur_wsgi.hub.store import redis_push_scripts as scripts
from murmur_wsgi.hub.store.push_base import (LEASE_SECS, MAX_CONFIGS_PER_TASK, MAX_FAILURES,
                                             TASK_GONE, TENANT_DELIVERIES, PushRecord,
                                             PushStorage)
from murmur_wsgi.hub.store.redis_reads import MAX_ID_BYTES
from murmur_wsgi.hub.store.redis_client import each_task
from murmur_wsgi.hub.store.redis_client import guarded as _guarded
from murmur_wsgi.hub.store.redis_cluster import FAILURES
from murmur_wsgi.hub.store.redis_push_looks import key_of as _key_of
from murmur_wsgi.hub.store.redis_push_looks import by_tenant, listed, listing, looked, more
from murmur_wsgi.hub.store.redis_keys import (PUSH_ACTIVE, PUSH_TENANTS, PUSH_WAKE,
                                              configs_key, events_key, lease_key, live_key,
                                              member, push_active_key, push_counter_key,
                                              retained_keys, slots_key, split_member,
                                              task_key)
from murmur_wsgi.wire.encode import compact_utf8 as _dumps
from murmur_wsgi.wire.task import now_ms

logger = logging.getLogger(__name__)

LEASE_MS = int(LEASE_SECS * 1000)
FULL_SCAN_SECS = 1.0           # how often a waiting dispatcher looks at every active config
NOTIFIED_MAX = 50_000          # tasks heard of between two full looks (more: look at all)


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
        self.waiting: dict[str, int] = {}      # name -> the event after which to wake
        self.candidates: set[str] = set()      # names to look at again
        self.skip: frozenset = frozenset()     # the last call's skip (records' keys)
        self.full_at = 0.0                     # monotonic time of the next full scan
        self.more: dict[str, list] = {}        # tenant -> names a look left for later


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
                         for name in ("DUE", "LEASE", "RELEASE", "ADVANCE", "UNLIST_TENANTS")}
        # A config's save and delete are acknowledged: the replicas hold them (WAIT).
        self._scripts.update({name: conn.command.script(getattr(scripts, name), durable=True)
                              for name in ("SAVE", "DELETE")})
        self._cond = threading.Condition()
        self._heard: set[str] = set()          # names the wake channel brought
        self._woken: set[str] = set()          # tasks of waiting configs with a new event
        self._every = False                    # notify_push: look at every config
        self._watch: dict[str, int] = {}       # task id -> the event after which to wake
        self._notified: dict[str, int] = {}    # task id -> its newest event heard
        self._tenants: dict[tuple, str] = {}   # a config's key -> its tenant (names met)

    # --- the listener's side (its thread) ---------------------------------------

    def _on_wake(self, name: str) -> None:
        with self._cond:
            self._heard.add(name)
            self._cond.notify_all()

    def _on_event(self, task_id: str, n: int) -> None:
        with self._cond:
            if n > self._notified.get(task_id, 0):
                self._notified[task_id] = n
            if len(self._notified) > NOTIFIED_MAX:
                self._notified.clear()             # too many to keep: look at them all
                self._every = True
                self._cond.notify_all()
            after = self._watch.get(task_id)
            if after is not None and n > after:
                self._woken.add(task_id)
                self._cond.notify_all()

    def _watching(self, waiting: dict) -> None:
        """Wake on a new event of the tasks of ``waiting``; one heard already wakes now."""
        watch: dict[str, int] = {}
        for name, after in waiting.items():
            task_id = _key_of(name)[1]
            watch[task_id] = min(after, watch.get(task_id, after))
        with self._cond:
            self._watch = watch
            self._woken.update(t for t, after in watch.items()
                               if self._notified.get(t, 0) > after)

    # --- configs ------------------------------------------------------------------

    @_guarded
    def push_save(self, record, from_start):
        raw = _dumps({"tenant": record.tenant, "agent": record.agent, "url": record.url,
                      "token": record.token, "b": record.size})
        tenant, task_id = record.tenant, record.task_id
        name = member(tenant, task_id, record.id)
        out = self._scripts["SAVE"](
            keys=[configs_key(tenant, task_id), task_key(tenant, task_id),
                  push_counter_key(tenant), events_key(tenant, task_id),
                  *retained_keys(tenant)[1:]],
            args=[record.id, raw, "1" if from_start else "0", MAX_CONFIGS_PER_TASK,
                  PUSH_WAKE, name],
            # NOTE: listed before it exists, and again after (``_unlist``); one round trip
            # on one Redis.
            before=listing([name]), then=listing([name]))
        if out == 0:
            return TASK_GONE
        return None if out is None else _record(task_id, record.id, out)

    @_guarded
    def push_get(self, tenant, agent, task_id, config_id):
        if len(task_id) > MAX_ID_BYTES:
            return None
        raw = self._redis.hget(configs_key(tenant, task_id), config_id)
        if raw is None:
            return None
        found = _record(task_id, config_id, raw)
        return found if (found.tenant, found.agent) == (tenant, agent) else None

    @_guarded
    def push_list(self, tenant, agent, task_id):
        if len(task_id) > MAX_ID_BYTES:
            return []
        records = [_record(task_id, config_id, raw) for config_id, raw
                   in self._redis.hgetall(configs_key(tenant, task_id)).items()]
        return sorted((r for r in records if (r.tenant, r.agent) == (tenant, agent)),
                      key=lambda r: r.created)

    @_guarded
    def push_delete(self, tenant, agent, task_id, config_id):
        if len(task_id) > MAX_ID_BYTES:
            return False
        # NOTE: its name stays in push:active: the dispatchers its wake-up makes look at it
        # drop it (``_unlist``), as a config that can be saved again meanwhile.
        return bool(self._scripts["DELETE"](
            keys=[configs_key(tenant, task_id), task_key(tenant, task_id),
                  *retained_keys(tenant)[1:]],
            args=[config_id, tenant, agent, PUSH_WAKE, member(tenant, task_id, config_id)]))

    # --- what is due ------------------------------------------------------------

    def _alive(self, holders) -> dict:
        """``{holder: whether its liveness key lives}`` (the hub's keys: one round trip)."""
        holders = sorted(holders)
        found = each_task(self._redis, holders, lambda pipe, h: pipe.exists(live_key(h)))
        return {holder: bool(hit) for holder, hit in zip(holders, found)}

    def _push_due_once(self, owner, skip, names=None) -> tuple:
        """(due records, {name: event to wait after}, {tenant: names not looked at}: a
        tenant's beyond those it can deliver at once); ``names`` only, or all of
        ``push:active``."""
        after = []                              # tenants listed past the names read
        if names is None:
            names, after = listed(self._redis)
            self._tenants = {}                  # the names met: those listed now
        pending, waiting, gone, rest = [], {}, [], {}
        skipped = {f"{task_id}/{config_id}" for task_id, config_id in skip}
        found: dict[str, int] = {}              # tenant -> its configs found pending
        page = 0
        while names:
            looked, left = self._looked(names, skipped, TENANT_DELIVERIES, found)
            rest.update(left)
            for tenant, (due, wait, done) in looked:
                pending += [(tenant, local, raw, holder) for local, raw, holder in due]
                found[tenant] = found.get(tenant, 0) + len(due)
                waiting.update((member(tenant, local), int(n)) for local, n in wait)
                gone += [member(tenant, local) for local in done]
            # NOTE: a tenant whose names read left its slots free (all waiting, or skipped)
            # has its next ones read: they are due, or watched, as the first.
            after = more(after, found, TENANT_DELIVERIES)
            page += 1
            names, after = listed(self._redis, after, page) if after else ([], [])
        if gone:
            self._unlist(gone)
        alive = self._alive({h for *_, h in pending if h and h != owner})
        records = []
        for tenant, local, raw, holder in pending:
            if not holder or holder == owner or not alive[holder]:
                task_id, _, config_id = local.rpartition("/")
                records.append(_record(task_id, config_id, raw))
        return records, waiting, rest

    def _unlist(self, names: list) -> None:
        """Take ``names`` (a look found their configs gone, or finished and caught up) out
        of the lists, then look at them once more: one saved again since that look (its
        name listed before the removal) is listed again. A save lists its name after its
        script too, so whichever comes last, a config saved stays listed. A tenant left
        with none leaves ``push:tenants`` (``UNLIST_TENANTS``)."""
        tenants = by_tenant(names)
        pipe = self._redis.pipeline(transaction=False)
        pipe.srem(PUSH_ACTIVE, *names)
        for quoted, own in tenants.items():
            pipe.zrem(push_active_key(quoted), *own)
        pipe.execute()
        every = {split_member(name)[1] for name in names}      # none due, none waited on
        gone = {member(tenant, local) for tenant, (_, _, done) in self._looked(names, every)[0]
                for local in done}
        back = [name for name in names if name not in gone]
        if back:
            pipe = self._redis.pipeline(transaction=False)
            for command in listing(back):
                pipe.execute_command(*command)
            pipe.execute()
        quoted = sorted(tenants)
        self._scripts["UNLIST_TENANTS"](
            keys=[PUSH_TENANTS, *(push_active_key(q) for q in quoted)], args=quoted)

    def _looked(self, names, skipped: set, most: int = 0, found=None) -> tuple[list, dict]:
        """``looked``'s answer for ``names`` (each one's tenant remembered)."""
        return looked(self._redis, self._scripts["DUE"], self._tenants, names, skipped, most,
                      found)

    @_guarded
    def push_due(self, owner, timeout, skip=frozenset()):
        # NOTE: a full scan of push:active at most every FULL_SCAN_SECS (and whenever
        # ``timeout`` is 0); otherwise only the configs something woke: an event written to
        # a waiting config's task, a config named on push:wake (saved, deleted, released
        # anywhere), or one that left ``skip`` since the last call (delivered here, or no
        # longer blocked); a wake-up for a skipped config returns [] at once, so the
        # dispatcher retries the configs it found blocked. So a streamed run, or a
        # delivery, costs its own configs, not every active one. Only the dispatcher's loop
        # waits here (timeout > 0); the state below is its own.
        if timeout <= 0:
            return self._push_due_once(owner, skip)[0]
        # NOTE: the listener tells a waiting dispatcher only: a hub without one keeps nothing.
        self.conn.on_wake, self.conn.on_event = self._on_wake, self._on_event
        self.conn.on_wakes_lost = self.notify_push      # a gap: the next call looks at all
        self.conn.start_feed()
        now = time.monotonic()
        state = self._push_wait
        left_skip = state.skip - set(skip)
        state.skip = frozenset(skip)
        if now >= state.full_at:
            with self._cond:
                self._notified.clear()          # what comes now, the scan or a wake-up sees
                self._heard.clear()
                self._every = False
            due, state.waiting, state.more = self._push_due_once(owner, skip)
            state.full_at, state.candidates = now + FULL_SCAN_SECS, set()
            self._watching(state.waiting)
        else:
            left = [member(self._tenants[key], *key) for key in left_skip
                    if key in self._tenants]
            state.candidates.update(left)
            self._follow(state, left)
            due = self._push_look(state, owner, skip)
        deadline = now + timeout
        skipped = set(skip)
        while not due and not self._closed.is_set():
            left = min(deadline, state.full_at) - time.monotonic()
            if left <= 0:
                return []
            subscribed = self.conn.feed.subscribed
            with self._cond:
                self._cond.wait_for(lambda: self._heard or self._woken or self._every,
                                    left if subscribed else min(left, self._block))
                heard, woken, every = self._heard, self._woken, self._every
                self._heard, self._woken, self._every = set(), set(), False
            if every:
                state.full_at = 0.0
                return []                              # the next call scans them all
            state.candidates.update(heard)
            self._follow(state, heard)
            state.candidates.update(name for name in state.waiting
                                    if not subscribed or _key_of(name)[1] in woken)
            if any(_key_of(name)[1:] in skipped for name in state.candidates):
                return []      # one the dispatcher skips moved: let it reconsider its skip
            due = self._push_look(state, owner, skip)
        return due

    def _push_look(self, state, owner, skip) -> list:
        """Look again at ``state.candidates`` only (then none are left)."""
        names = sorted(state.candidates)
        state.candidates = set()
        if not names:
            return []
        due, again, rest = self._push_due_once(owner, skip, names)
        for name in names:
            state.waiting.pop(name, None)
        state.waiting.update(again)
        for tenant, left in rest.items():
            state.more[tenant] = left + state.more.get(tenant, [])
        self._watching(state.waiting)
        return due

    @staticmethod
    def _follow(state, names) -> None:
        """A config of ``names`` left a delivery slot (delivered, released, no longer
        skipped): its tenant's next configs a look left for later are looked at too."""
        for tenant in {split_member(name)[0] for name in names}:
            left = state.more.get(tenant)
            if left:
                state.candidates.update(left[:TENANT_DELIVERIES])
                del left[:TENANT_DELIVERIES]

    def notify_push(self):
        with self._cond:
            self._every = True
            self._cond.notify_all()

    # --- leases -------------------------------------------------------------------

    @_guarded
    def push_lease(self, record, owner):
        tenant, task_id, config_id = record.tenant, record.task_id, record.id
        keys = [lease_key(tenant, task_id, config_id), slots_key(tenant)]
        args = [owner, LEASE_MS, f"{task_id}/{config_id}", TENANT_DELIVERIES]
        if self._scripts["LEASE"](keys=keys, args=args):
            return True
        # NOTE: refused while a holder may live: the holders' liveness read, then once more.
        holder, slots = self._redis.get(keys[0]), self._redis.hgetall(keys[1])
        holders = ({holder} | {v.rpartition(" ")[0] for v in slots.values()}) - {None, owner}
        alive = self._alive(holders)
        if all(alive.values()):
            return False
        told = [part for h, live in alive.items() for part in (h, "1" if live else "0")]
        return bool(self._scripts["LEASE"](keys=keys, args=args + told))

    def push_release(self, record, owner):
        # NOTE: never raises: the dispatcher releases in a ``finally``; a lease Redis did not
        # hear given back expires by itself (LEASE_SECS, or at once when this replica dies).
        tenant, task_id, config_id = record.tenant, record.task_id, record.id
        try:
            self._scripts["RELEASE"](
                keys=[lease_key(tenant, task_id, config_id), slots_key(tenant)],
                args=[owner, f"{task_id}/{config_id}", PUSH_WAKE,
                      member(tenant, task_id, config_id)])
        except FAILURES as ex:
            logger.warning("redis store: push_release failed: %s", type(ex).__name__)

    @_guarded
    def push_advance(self, record, owner, seq, outcome, error=None):
        tenant, task_id, config_id = record.tenant, record.task_id, record.id
        out = self._scripts["ADVANCE"](
            keys=[configs_key(tenant, task_id), lease_key(tenant, task_id, config_id),
                  slots_key(tenant)],
            args=[config_id, record.generation, owner, seq, outcome, error or "", LEASE_MS,
                  f"{task_id}/{config_id}", MAX_FAILURES, now_ms()])
        return None if out is None else _record(task_id, config_id, out)
