"""The Lua scripts of push on Redis (redis_push.py): each step of push_base.py is one.

A config is a field of the hash ``push:{task}`` (its value JSON: tenant,
agent, url, token, cursor, failures, disabled, disabledMs?, lastError?, gen,
created); ``push:active`` holds ``{task}/{config}`` of every config that may
still have events to deliver (a config id has no ``/``). A lease is
``push:lease:{task}/{config}`` (the holder's replica id, ``PX``); it counts
only while its holder's liveness key ``replica:{id}`` exists, so a dead
replica's lease and tenant slot free themselves at once. The tenant's slots
are the sorted set ``push:slots:{tenant}`` (member the config, score the
lease's deadline, Redis's own clock). ``push:wake`` is a short stream every
save, delete and release adds to (``m``: the config), so a waiting dispatcher
(a blocking XREAD) wakes on any replica and looks at that config.
"""
from __future__ import annotations

from murmur_wsgi.hub.task import TERMINAL

_TERMINAL = "local T = {" + ", ".join(f"['{s}'] = 1" for s in sorted(TERMINAL)) + "}\n"
_NOW = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"""
WAKE_LEN = 64
SKIP_BATCH = 32                # artifact chunks a config may lag before it is due anyway

# KEYS: push:{task}, task:{task}, push:n, push:active, ev:{task}, push:wake
# ARGV: config id, the record's JSON (tenant, agent, url, token), from_start, max per task,
#       member
SAVE = f"""
local old = redis.call('HGET', KEYS[1], ARGV[1])
local created, gen
if old then
  old = cjson.decode(old)
  created, gen = old.created, old.gen + 1
else
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return false end
  created, gen = redis.call('INCR', KEYS[3]), 1
end
local r = cjson.decode(ARGV[2])
r.cursor = 0
if ARGV[3] ~= '1' then r.cursor = tonumber(redis.call('HGET', KEYS[2], 'nev') or '0') end
r.failures, r.disabled, r.gen, r.created = 0, false, gen, created
local out = cjson.encode(r)
redis.call('HSET', KEYS[1], ARGV[1], out)
redis.call('SADD', KEYS[4], ARGV[5])
local ttl = redis.call('PTTL', KEYS[5])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) else redis.call('PERSIST', KEYS[1]) end
redis.call('XADD', KEYS[6], 'MAXLEN', '~', {WAKE_LEN}, '*', 'w', 's', 'm', ARGV[5])
return out
"""

# KEYS: push:{task}, push:active, lease, slots, push:wake   ARGV: config id, tenant, agent, member
DELETE = f"""
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local r = cjson.decode(raw)
if r.tenant ~= ARGV[2] or r.agent ~= ARGV[3] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('SREM', KEYS[2], ARGV[4])
redis.call('DEL', KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[4])
redis.call('XADD', KEYS[5], 'MAXLEN', '~', {WAKE_LEN}, '*', 'w', 'd', 'm', ARGV[4])
return 1
"""

# KEYS: push:active, push:wake
# ARGV: key prefix, owner, n, n skipped members, then the members to look at (none: all)
# Returns {wake stream's last id, {member, json}… due, {member, n}… to wait on (n: the
# event after which to wake)}. A config whose pending events are all artifact chunks
# (never sent) is not due: it waits for a status or final event (or SKIP_BATCH chunks, so
# its cursor keeps up), so a streamed run does not lease its config for every chunk.
DUE = _TERMINAL + f"""
local P, owner = ARGV[1], ARGV[2]
local skip, n = {{}}, tonumber(ARGV[3])
for i = 4, 3 + n do skip[ARGV[i]] = true end
local members
if #ARGV > 3 + n then
  members = {{}}
  for i = 4 + n, #ARGV do
    if redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 1 then members[#members + 1] = ARGV[i] end
  end
else
  members = redis.call('SMEMBERS', KEYS[1])
end
local function chunks_only(ev, cursor)
  local pending = redis.call('XRANGE', ev, (cursor + 1) .. '-0', '+', 'COUNT', {SKIP_BATCH})
  if #pending >= {SKIP_BATCH} then return false end
  for _, entry in ipairs(pending) do
    if string.sub(entry[2][2], 1, 17) ~= '{{"artifactUpdate"' then return false end
  end
  return true
end
local due, waiting = {{}}, {{}}
for _, m in ipairs(members) do
  local cut = string.find(m, '/[^/]*$')
  local task, cid = string.sub(m, 1, cut - 1), string.sub(m, cut + 1)
  local raw = redis.call('HGET', P .. 'push:' .. task, cid)
  local info = redis.call('HMGET', P .. 'task:' .. task, 'state', 'nev')
  local ev = P .. 'ev:' .. task
  local done = false
  if not raw or not info[1] or redis.call('EXISTS', ev) == 0 then
    done = true
  else
    local r = cjson.decode(raw)
    local final, nev = T[info[1]], tonumber(info[2])
    if r.disabled or r.cursor >= nev then
      if final then
        done = true
        local ttl = redis.call('PTTL', ev)
        if ttl > 0 then redis.call('PEXPIRE', P .. 'push:' .. task, ttl) end
      elseif not r.disabled and not skip[m] then
        waiting[#waiting + 1] = {{m, nev}}
      end
    elseif not skip[m] then
      if not final and chunks_only(ev, r.cursor) then
        waiting[#waiting + 1] = {{m, nev}}
      else
        local holder = redis.call('GET', P .. 'push:lease:' .. m)
        if not holder or holder == owner
            or redis.call('EXISTS', P .. 'replica:' .. holder) == 0 then
          due[#due + 1] = {{m, raw}}
        end
      end
    end
  end
  if done then redis.call('SREM', KEYS[1], m) end
end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local wake = '0-0'
if last[1] then wake = last[1][1] end
return {{wake, due, waiting}}
"""

# KEYS: lease, slots   ARGV: owner, lease ms, member, tenant's limit, key prefix
LEASE = _NOW + """
local P = ARGV[5]
local holder = redis.call('GET', KEYS[1])
local now = now_ms()
local ms = tonumber(ARGV[2])
if holder ~= ARGV[1] then
  if holder and redis.call('EXISTS', P .. 'replica:' .. holder) == 1 then return 0 end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  local held = 0
  for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if m ~= ARGV[3] then
      local h = redis.call('GET', P .. 'push:lease:' .. m)
      if h and redis.call('EXISTS', P .. 'replica:' .. h) == 1 then
        held = held + 1
      else
        redis.call('ZREM', KEYS[2], m)
      end
    end
  end
  if held >= tonumber(ARGV[4]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ms)
redis.call('ZADD', KEYS[2], now + ms, ARGV[3])
redis.call('PEXPIRE', KEYS[2], ms)
return 1
"""

# KEYS: lease, slots, push:wake   ARGV: owner, member
RELEASE = f"""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', {WAKE_LEN}, '*', 'w', 'r', 'm', ARGV[2])
return 1
"""

# KEYS: push:{task}, lease, slots
# ARGV: config id, generation, owner, seq, outcome, error, lease ms, member, max failures,
#       now (wall clock ms, for disabledAt)
ADVANCE = _NOW + """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return false end
local r = cjson.decode(raw)
if r.gen ~= tonumber(ARGV[2]) or redis.call('GET', KEYS[2]) ~= ARGV[3] then return false end
local seq = tonumber(ARGV[4])
if seq > r.cursor then r.cursor = seq end
if ARGV[5] == 'dropped' then
  r.failures = r.failures + 1
  r.lastError = ARGV[6]
  if r.failures >= tonumber(ARGV[9]) then
    r.disabled = true
    r.disabledMs = tonumber(ARGV[10])
  end
elseif ARGV[5] == 'delivered' then
  r.failures = 0
end
local out = cjson.encode(r)
redis.call('HSET', KEYS[1], ARGV[1], out)
local ms = tonumber(ARGV[7])
redis.call('PEXPIRE', KEYS[2], ms)
redis.call('ZADD', KEYS[3], now_ms() + ms, ARGV[8])
redis.call('PEXPIRE', KEYS[3], ms)
return out
"""
