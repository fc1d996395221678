"""Admission's counters in Redis: every replica and worker of a hub counts against one bound.

Per tenant, two keys among the tenant's own (``murmur:{t:<tenant>}:``, its slot):

- ``running``, a sorted set of leases: one member per run admitted
  (its task id), scored by the lease's expiry (Redis server time, ms). A run's
  replica renews its leases with its liveness (``renew``), a run that ends
  gives its lease back (``give``, and the END script: a task ended by any
  replica, the sweep included, frees its slot at once). A lease whose replica
  died before its task was stored expires by itself ``LEASE_LIVENESSES`` ×
  ``redis.liveness_secs`` after its last renewal, so no slot is held forever.
  A run whose task ended while its agent still executes (overdue) holds a
  lease of its own, ``overdue:<task id>`` (``hold``), renewed like a run's
  and given back when the agent returns.
- ``rate``, a hash ``tokens``, ``at``: the token bucket of
  ``limits.rate_per_minute`` (full, ``rate`` tokens; one more every
  60/``rate`` s; a run takes one), the memory store's rule, kept in Redis. It
  expires a minute after its last use: by then the bucket would be full again.

Admission is one script (``ADMIT``): the concurrency bound (the leases not
expired), then the bucket, then the lease taken (the expired ones dropped), all on
Redis's clock, so two replicas racing for the last slot never both get it. Redis at
``maxmemory`` refuses it whole (its first write is one Redis refuses then).
"""
from __future__ import annotations

from murmur_wsgi.hub.store.counters import CONCURRENCY, OVERDUE, RATE, Counters
from murmur_wsgi.hub.store.redis_client import guarded
from murmur_wsgi.hub.store.redis_clock import CLOCK_FN, TERMINAL_FN
from murmur_wsgi.hub.store.redis_keys import rate_key, running_key, task_key

LEASE_LIVENESSES = 2             # a lease lives this many liveness periods without renewal

_NOW = CLOCK_FN + """
local now = now_ms()
"""

# Takes a run's lease in ``running`` and a token of ``rate`` (the bucket): 0, or what
# refused (1: the concurrency bound, 2: the rate). Also part of the task store's OPEN script.
# Its script opens with ``CLOCK_FN`` (redis_clock).
# NOTE: its first write is the bucket's HSET, a command Redis refuses at maxmemory (OOM):
# a script's first write decides, and a write Redis allows then (ZREMRANGEBYSCORE) would
# have let every write after it through, the OPEN script's task and run included. The
# expired leases are not counted, and dropped as a lease is taken.
ADMIT_FN = """
local function admit(running, bucket, id, concurrency, rate, lease)
  local now = now_ms()
  if redis.call('ZCOUNT', running, '(' .. now, '+inf') >= concurrency then return 1 end
  local b = redis.call('HMGET', bucket, 'tokens', 'at')
  local tokens = tonumber(b[1])
  if tokens == nil then
    tokens = rate
  else
    local at = tonumber(b[2]) or now          -- a bucket without its time: its tokens kept
    tokens = math.min(rate, tokens + math.max(0, now - at) * rate / 60000)
  end
  local code = 2
  if tokens >= 1 then
    tokens = tokens - 1
    code = 0
  end
  redis.call('HSET', bucket, 'tokens', tostring(tokens), 'at', now)
  redis.call('PEXPIRE', bucket, 60000)
  if code == 0 then
    redis.call('ZREMRANGEBYSCORE', running, '-inf', now)
    redis.call('ZADD', running, now + lease, id)
    redis.call('PEXPIRE', running, lease)
  end
  return code
end
"""

# KEYS: running, rate   ARGV: task id, concurrency, rate per minute, lease ms
ADMIT = CLOCK_FN + ADMIT_FN + """
return admit(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]))
"""

# KEYS: running (one tenant's), then each lease's task record (an overdue lease's: running)
# ARGV: lease ms, the leases' members (task ids, or overdue members)
# A lease still held is renewed. One gone (it lapsed while Redis was away or stalled past
# it: expired, or dropped by an admission) is taken again while its task has not ended:
# the END script frees a task's slot as it ends it, and no renewal takes it back. An
# overdue run's (its task ended, its agent executes on: its replica lists it until its
# agent returns, then gives it back) is taken again as it is.
RENEW = _NOW + TERMINAL_FN + """
for i = 2, #ARGV do
  local added = redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[1]), ARGV[i])
  if added == 0 and not redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    local state = KEYS[i] ~= KEYS[1] and redis.call('HGET', KEYS[i], 'state')
    if KEYS[i] == KEYS[1] or (state and not T[state]) then
      added = redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[i])
    end
  end
  if added == 1 then
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
  end
end
return 1
"""

# KEYS: running   ARGV: member, lease ms
HOLD = _NOW + """
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

# KEYS: running
RUNNING = _NOW + """
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
"""


class RedisCounters(Counters):
    """Runs at once and runs per minute of each tenant, counted in one Redis for the hub."""

    ends_free = True         # the END script (redis_scripts) frees the task's slot

    def __init__(self, conn):
        self._redis = conn.redis
        self.lease_ms = LEASE_LIVENESSES * conn.liveness_ms
        self._admit = conn.command.script(ADMIT)      # every message's (redis_commands.Commands)
        self._renew = self._redis.register_script(RENEW)
        self._hold = self._redis.register_script(HOLD)
        self._running = self._redis.register_script(RUNNING)

    @guarded
    def take(self, tenant, task_id, concurrency, rate):
        code = self._admit(keys=[running_key(tenant),
                                 rate_key(tenant)],
                           args=[task_id, concurrency, rate, self.lease_ms])
        return (None, CONCURRENCY, RATE)[int(code)]

    @guarded
    def give(self, tenant, task_id):
        self._redis.zrem(running_key(tenant), task_id)

    @guarded
    def hold(self, tenant, member):
        self._hold(keys=[running_key(tenant)], args=[member, self.lease_ms])

    @guarded
    def renew(self, held):
        # NOTE: one script per tenant (each its own slot), all in one pipeline: on a
        # cluster, one round trip per primary.
        tenants: dict[str, list] = {}
        for tenant, task_id in held:
            tenants.setdefault(tenant, []).append(task_id)
        if tenants:
            pipe = self._redis.pipeline(transaction=False)
            for tenant, task_ids in tenants.items():
                # NOTE: an overdue member names no record (its task has ended): its key
                # is the running key itself.
                running = running_key(tenant)
                tasks = [running if task_id.startswith(OVERDUE) else task_key(tenant, task_id)
                         for task_id in task_ids]
                self._renew(keys=[running, *tasks],
                            args=[self.lease_ms, *task_ids], client=pipe)
            pipe.execute()

    @guarded
    def running(self, tenant):
        return int(self._running(keys=[running_key(tenant)]))
