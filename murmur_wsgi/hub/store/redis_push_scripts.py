"""The Lua scripts of push on Redis (redis_push.py): each step of push_base.py is one.

Every key is the tenant's (its slot, ``redis_keys``), declared in ``KEYS``. A config
is a field of the hash ``push:<task>`` (its value JSON: tenant, agent, url, token,
cursor, failures, disabled, disabledMs?, lastError?, gen, created); within the
tenant a config is named ``<task>/<config>`` (a config id has no ``/``). A lease is
``push:lease:<task>/<config>`` (the holder's replica id, ``PX``); it counts only
while its holder's liveness key ``replica:<id>`` (the hub's slot) exists, which no
script of a tenant's slot may read: the caller reads the holders' liveness first and
passes what it found (a holder it did not name counts as alive, so a lease is never
taken from a replica that may live). The tenant's slots are the hash ``push:slots``
(field the config, value ``<holder> <deadline ms>``, Redis's own clock). Saves,
deletes and releases publish the config (``<tenant>/<task>/<config>``) on the
channel ``push:wake``, so a waiting dispatcher on any replica looks at it.

A config's bytes (``b`` in its JSON: ``PushRecord.size``) count toward its task's
(retention): a save adds them (the difference when it replaces one), a delete takes
them; to the tenant's ``sizes`` and ``bytes`` once the task finished, else to its
record's ``pb``, which its END adds with its own. A config saved by an older hub has no
``b``: it counts nothing, and takes nothing when deleted.
"""
from __future__ import annotations

from murmur_wsgi.hub.store.redis_clock import CLOCK_FN, TERMINAL_FN

_TERMINAL = TERMINAL_FN
_NOW = CLOCK_FN         # now_ms(): one TIME per script, however many tasks DUE watches
# KEYS given: the task's record, the tenant's sizes and bytes (retention's)
_COUNT = """
local function count(task, sizes, total, added)
  local id = redis.call('HGET', task, 'id')
  if added == 0 or not id then return end
  if redis.call('HEXISTS', sizes, id) == 1 then
    redis.call('HINCRBY', sizes, id, added)
    redis.call('INCRBY', total, added)
  else
    redis.call('HINCRBY', task, 'pb', added)
  end
end
"""
SKIP_BATCH = 32                # artifact chunks a config may lag before it is due anyway
DUE_KEYS = 4                   # per config: push:<task>, task:<task>, ev:<task>, its lease

# KEYS: push:<task>, task:<task>, the tenant's push:n, ev:<task>, sizes, bytes
# ARGV: config id, the record's JSON (tenant, agent, url, token, b), from_start, max per
#       task, the wake channel, the config's hub-wide name
# Returns the saved record's JSON; false when the task has MAX_CONFIGS_PER_TASK others; 0
# (nothing saved) when its record is gone: forgotten after the caller found it.
SAVE = _COUNT + """
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local old = redis.call('HGET', KEYS[1], ARGV[1])
local created, gen, was = nil, nil, 0
if old then
  old = cjson.decode(old)
  created, gen, was = old.created, old.gen + 1, tonumber(old.b) or 0
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
count(KEYS[2], KEYS[5], KEYS[6], r.b - was)
local ttl = redis.call('PTTL', KEYS[4])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) else redis.call('PERSIST', KEYS[1]) end
redis.call('PUBLISH', ARGV[5], ARGV[6])
return out
"""

# KEYS: push:<task>, task:<task>, sizes, bytes
# ARGV: config id, tenant, agent, the wake channel, its hub-wide name
# The config's lease and slot stay until its delivery gives them back (RELEASE) or they
# run out: the delivery goes on to the end of its event, and its slot is its tenant's.
DELETE = _COUNT + """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local r = cjson.decode(raw)
if r.tenant ~= ARGV[2] or r.agent ~= ARGV[3] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
count(KEYS[2], KEYS[3], KEYS[4], -(tonumber(r.b) or 0))
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
"""

# KEYS: DUE_KEYS per config (one tenant's)
# ARGV: watch ms, the most configs to find pending (0: no bound), then the configs' names
#       in the tenant and whether each is skipped, in pairs
# Returns {{name, json, holder ('' none)}… pending, {name, n}… to wait on (n: the event
# after which to wake), {name}… done (gone, or finished and caught up: out of the
# hub's lists: push:active:<tenant>)}. A pending config is due unless a live replica other than the
# caller holds its lease: the caller tells, knowing the holders. A config whose pending
# events are all artifact chunks (never sent) is not pending: it waits for a status or
# final event (or SKIP_BATCH chunks, so its cursor keeps up), so a streamed run does not
# lease its config for every chunk. The task of a config to wait on is watched for
# ``watch ms`` (its record's ``w``, as a stream's read watches it: redis_scripts), so its
# next events are announced and wake the waiting dispatcher. Once the most pending are
# found, the configs after them are not looked at (neither pending, waited on, nor done).
# A config whose record the hub cannot read is done (``readable``).
DUE = _TERMINAL + _NOW + f"""
local watch_ms = tonumber(ARGV[1])
local function watch(task)
  local now = now_ms()
  if (tonumber(redis.call('HGET', task, 'w')) or 0) < now + watch_ms / 2 then
    redis.call('HSET', task, 'w', now + watch_ms)
  end
end
local function chunks_only(ev, cursor)
  local pending = redis.call('XRANGE', ev, (cursor + 1) .. '-0', '+', 'COUNT', {SKIP_BATCH})
  if #pending >= {SKIP_BATCH} then return false end
  for _, entry in ipairs(pending) do
    if string.sub(entry[2][2], 1, 17) ~= '{{"artifactUpdate"' then return false end
  end
  return true
end
-- A record the hub cannot read (not its JSON, a field missing or of another type) is
-- done: never due, and no error that would fail every tenant's look.
local function readable(raw)
  local ok, r = pcall(cjson.decode, raw)
  if not ok or type(r) ~= 'table' or type(r.disabled) ~= 'boolean' then return nil end
  for _, f in ipairs({{'tenant', 'agent', 'url'}}) do
    if type(r[f]) ~= 'string' then return nil end
  end
  for _, f in ipairs({{'cursor', 'failures', 'gen', 'created', 'disabledMs'}}) do
    local n = r[f]
    if f == 'disabledMs' and (n == nil or n == cjson.null) then n = 0 end
    if type(n) ~= 'number' or not (n > -2^53 and n < 2^53) then return nil end
  end
  return r
end
local most = tonumber(ARGV[2])
local due, waiting, gone = {{}}, {{}}, {{}}
for j = 1, (#ARGV - 2) / 2 do
  if most > 0 and #due >= most then break end
  local m, skipped = ARGV[2 * j + 1], ARGV[2 * j + 2] == '1'
  local k = {DUE_KEYS} * (j - 1)
  local configs, task, ev, lease = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
  local cid = string.sub(m, string.find(m, '/[^/]*$') + 1)
  local raw = redis.call('HGET', configs, cid)
  local info = redis.call('HMGET', task, 'state', 'nev')
  local r = raw and readable(raw)
  local done = false
  if not r or not info[1] or redis.call('EXISTS', ev) == 0 then
    done = true
  else
    local final, nev = T[info[1]], tonumber(info[2]) or 0
    if r.disabled or r.cursor >= nev then
      if final then
        done = true
        local ttl = redis.call('PTTL', ev)
        if ttl > 0 then redis.call('PEXPIRE', configs, ttl) end
      elseif not r.disabled and not skipped then
        watch(task)
        waiting[#waiting + 1] = {{m, nev}}
      end
    elseif not skipped then
      if not final and chunks_only(ev, r.cursor) then
        watch(task)
        waiting[#waiting + 1] = {{m, nev}}
      else
        due[#due + 1] = {{m, raw, redis.call('GET', lease) or ''}}
      end
    end
  end
  if done then gone[#gone + 1] = m end
end
return {{due, waiting, gone}}
"""

# KEYS: lease, slots
# ARGV: owner, lease ms, the config's name in the tenant, the tenant's limit, then pairs
#       of a holder and its liveness ("1" alive, "0" dead), as the caller found them
LEASE = _NOW + """
local holder = redis.call('GET', KEYS[1])
local now = now_ms()
local ms = tonumber(ARGV[2])
local dead = {}
for i = 5, #ARGV, 2 do dead[ARGV[i]] = ARGV[i + 1] == '0' end
if holder ~= ARGV[1] then
  if holder and not dead[holder] then return 0 end
  local held = 0
  local slots = redis.call('HGETALL', KEYS[2])
  for i = 1, #slots, 2 do
    local m, v = slots[i], slots[i + 1]
    if m ~= ARGV[3] then
      -- a value that is not '<holder> <deadline>' counts as run out: dropped, no error
      local cut = string.find(v, ' [^ ]*$')
      local h = cut and string.sub(v, 1, cut - 1)
      local deadline = cut and tonumber(string.sub(v, cut + 1))
      if deadline and deadline > now and not dead[h] then
        held = held + 1
      else
        redis.call('HDEL', KEYS[2], m)
      end
    end
  end
  if held >= tonumber(ARGV[4]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ms)
redis.call('HSET', KEYS[2], ARGV[3], ARGV[1] .. ' ' .. (now + ms))
redis.call('PEXPIRE', KEYS[2], ms)
return 1
"""

# KEYS: lease, slots   ARGV: owner, the config's name in the tenant, the wake channel,
#                          its hub-wide name
RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""

# KEYS: push:<task>, lease, slots
# ARGV: config id, generation, owner, seq, outcome, error, lease ms, its name in the tenant,
#       max failures, now (wall clock ms, for disabledAt)
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
redis.call('HSET', KEYS[3], ARGV[8], ARGV[3] .. ' ' .. (now_ms() + ms))
redis.call('PEXPIRE', KEYS[3], ms)
return out
"""

# KEYS: push:tenants, then each tenant's push:active:<tenant> (the hub's slot)
# ARGV: those tenants, as push:tenants lists them
# A tenant whose configs are all unlisted leaves push:tenants (a save lists its config
# before its tenant, so a tenant is never left out while a config of it is listed: a save
# between this and its own listing lists the tenant again after).
UNLIST_TENANTS = """
for i = 1, #ARGV do
  if redis.call('ZCARD', KEYS[i + 1]) == 0 then redis.call('SREM', KEYS[1], ARGV[i]) end
end
return 1
"""
