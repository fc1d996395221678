"""The Redis store's retention scripts: a tenant's finished tasks forgotten past its cap,
its retention time or its bytes (``redis_scripts`` loads them with the others, and its
``CREATE`` and ``END`` add a finished task with ``RETAIN_FN``'s ``finish``)."""
from __future__ import annotations

from murmur_wsgi.hub.store.redis_clock import CLOCK_FN

BYTES_BATCH = 10        # past its bytes, a tenant forgets up to this many at once even when
#                         its count's batch is smaller (a cap under 20), so its ends catch up

# Retention (store/retention.py): ``done`` holds the tenant's finished tasks scored by their
# end (Redis time, µs: scripts run one at a time, so each end has its own), ``sizes`` the
# bytes of each (its wire form and its events' payloads: the record's ``eb`` counts those
# as they are written; and its push configs', which their scripts add and take,
# redis_push_scripts) and ``total`` their sum. ``doomed`` are the oldest to forget while
# there are more than ``cap``, the oldest ended more than ``keep`` ms ago, or their bytes
# are past ``max_bytes`` (then down to a tenth below it, at most ``BYTES_BATCH`` if more
# than ``batch``; never the newest for its bytes: a task is not forgotten at its own end,
# whose push notifications are still to be sent, but at the next), at most ``batch``.
# ``finish`` adds one and returns the doomed only when they are a whole batch or the
# tenant is past its bytes, else none: a tenant at its cap forgets a batch every ``batch``
# ends, not one at each (each forgetting is two round trips of its end's request), and
# keeps fewer than ``batch`` (a tenth of its cap at most) more than its cap meanwhile; one
# at its bytes forgets down to a tenth below them, so it too pays once a tenth; the sweep
# (``DOOMED``) forgets the rest of those past their time. Forgetting one takes every key
# of it, which no script may name unless its caller declares it: ``FORGET`` does it, given
# those keys (redis.py reads the records' names first).
RETAIN_FN = """
local BYTES_BATCH = """ + str(BYTES_BATCH) + """

local function doomed(done, sizes, total, cap, keep, batch, max_bytes)
  local cutoff = now_us() - keep * 1000
  local card = redis.call('ZCARD', done)
  local bytes = tonumber(redis.call('GET', total)) or 0
  -- PERF: the common case (under the caps, the oldest still kept) reads one member
  local first = redis.call('ZRANGE', done, 0, 0, 'WITHSCORES')
  if #first == 0 or (card <= cap and bytes <= max_bytes and tonumber(first[2]) > cutoff) then
    return {}
  end
  local floor = max_bytes
  if bytes > max_bytes then floor = max_bytes - math.floor(max_bytes / 10) end
  local n = batch
  if bytes > floor then n = math.max(batch, BYTES_BATCH) end
  local oldest = redis.call('ZRANGE', done, 0, n - 1, 'WITHSCORES')
  local size = {}
  if bytes > floor then
    local ids = {}
    for j = 1, #oldest, 2 do ids[#ids + 1] = oldest[j] end
    size = redis.call('HMGET', sizes, unpack(ids))
  end
  local out = {}
  for j = 1, #oldest, 2 do
    local left = card - (j - 1) / 2          -- this one and the newer
    local heavy = bytes > floor and left > 1 -- never the newest for its bytes
    if left <= cap and not heavy and tonumber(oldest[j + 1]) > cutoff then break end
    out[#out + 1] = oldest[j]
    bytes = bytes - (tonumber(size[(j + 1) / 2]) or 0)
  end
  return out
end

-- PERF: whether a whole batch is due: past the bytes, a batch past the cap, or a batch's
-- newest past its time (fewer than a batch past the cap wait for more)
local function due(done, bytes, cap, keep, batch, max_bytes)
  if bytes <= max_bytes and redis.call('ZCARD', done) < cap + batch then
    local last = redis.call('ZRANGE', done, batch - 1, batch - 1, 'WITHSCORES')
    if #last == 0 or tonumber(last[2]) > now_us() - keep * 1000 then return false end
  end
  return true
end

local function finish(done, sizes, total, id, size, cap, keep, batch, max_bytes)
  local added = size
  if redis.call('ZADD', done, now_us(), id) == 0 then      -- ended again: counted once
    added = size - (tonumber(redis.call('HGET', sizes, id)) or 0)
  end
  redis.call('HSET', sizes, id, size)
  local bytes = redis.pcall('INCRBY', total, added)
  if type(bytes) == 'table' then            -- a sum not a number (written by hand): anew
    bytes = 0
    for _, v in ipairs(redis.call('HVALS', sizes)) do bytes = bytes + (tonumber(v) or 0) end
    redis.call('SET', total, bytes)
  end
  if not due(done, bytes, cap, keep, batch, max_bytes) then return {} end
  return doomed(done, sizes, total, cap, keep, batch, max_bytes)
end
"""

# KEYS: done, sizes, bytes   ARGV: cap, retention ms, batch, max bytes, whole ("1": none
# unless a whole batch is due, as at an end)
# Returns the ids to forget (``FORGET``), the oldest first.
DOOMED = CLOCK_FN + RETAIN_FN + """
local cap, keep, batch, max_bytes = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
                                    tonumber(ARGV[4])
if ARGV[5] == '1' and not due(KEYS[1], tonumber(redis.call('GET', KEYS[3])) or 0, cap, keep,
                              batch, max_bytes) then
  return {}
end
return doomed(KEYS[1], KEYS[2], KEYS[3], cap, keep, batch, max_bytes)
"""

FORGET_KEYS = 10         # per task: task ev push cancel idx ctx st cst upd msg
# KEYS: done, sizes, bytes, then FORGET_KEYS per task (its record, events, push configs,
# cancel mark, its sets idx ctx st cst upd, its msg claim)   ARGV: the task ids, in order
# Forgets each task still in ``done`` (a finished task's names never change): every key of
# it, and its bytes from ``sizes`` and their sum (only a task it forgets: the sum is
# always the sizes'); its push configs' names in ``push:active:<tenant>`` (the hub's) are left to
# the dispatchers, which drop a member whose config is gone. Returns how many it forgot.
FORGET = """
local n = 0
for i = 1, #ARGV do
  local id, b = ARGV[i], 3 + (i - 1) * 10
  if redis.call('ZREM', KEYS[1], id) == 1 then
    for k = b + 5, b + 9 do redis.call('ZREM', KEYS[k], id) end
    if redis.call('GET', KEYS[b + 10]) == id then redis.call('DEL', KEYS[b + 10]) end
    redis.call('DEL', KEYS[b + 1], KEYS[b + 2], KEYS[b + 3], KEYS[b + 4])
    local size = tonumber(redis.call('HGET', KEYS[2], id))
    if size then
      redis.call('HDEL', KEYS[2], id)
      redis.call('DECRBY', KEYS[3], size)
    end
    n = n + 1
  end
end
return n
"""
