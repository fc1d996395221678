"""The Redis store's Lua scripts: each store step that must be atomic is one script.

A task's record is the hash ``task:{id}``; its events are the stream
``ev:{id}`` whose entry ids are ``<n>-1`` (n = 1, 2, …: the event's position,
counted in the hash's field ``nev``). Every script that writes an event checks
the task's state first, so an event is never written after the final one.
"""
from __future__ import annotations

from murmur_wsgi.hub.store.redis_keys import EVENTS
from murmur_wsgi.hub.store.redis_limits import ADMIT_FN
from murmur_wsgi.hub.task import SUBMITTED, TERMINAL, WORKING

# Every event written to a watched task is announced on ``EVENTS`` as ``<task id> <n>``
# (redis_feed). A task is watched while its record's field ``w`` (Redis time, ms) is in the
# future: every read of a stream sets it (``READ``) and the readers' workers renew it
# (``WATCH``), so a task no stream reads costs its events no message. KEYS[1]: the record.
_NOW_MS = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"""

_NOTIFY = _NOW_MS + """
local function notify(id, n)
  local w = redis.call('HGET', KEYS[1], 'w')
  if w and tonumber(w) > now_ms() then
    redis.call('PUBLISH', '""" + EVENTS + """', id .. ' ' .. n)
  end
end
"""

# The task watched for ``ARGV`` ms more, unless it is for half of that already (and only
# if it exists: nothing is created). KEYS: task
_WATCH = _NOW_MS + """
local function watch(ms)
  if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
  local now = now_ms()
  local w = tonumber(redis.call('HGET', KEYS[1], 'w')) or 0
  if w < now + ms / 2 then redis.call('HSET', KEYS[1], 'w', now + ms) end
  return 1
end
"""

# KEYS: task   ARGV: ms
WATCH = _WATCH + """
return watch(tonumber(ARGV[1]))
"""

# A stream's read: the task watched (``_WATCH``), then its events after a position and
# whether its log exists, in one step: an event written after it is announced.
# KEYS: task, ev   ARGV: the first entry id to read, watch ms
READ = _WATCH + """
watch(tonumber(ARGV[2]))
return {redis.call('XRANGE', KEYS[2], ARGV[1], '+'), redis.call('EXISTS', KEYS[2])}
"""

_TERMINAL = "local T = {" + ", ".join(f"['{s}'] = 1" for s in sorted(TERMINAL)) + "}\n"

# A task changes state: its id moves from ``st:{tenant}:{agent}:{old}`` to ``…:{new}``
# and from ``cst:{tenant}:{agent}:{old}:{ctx}`` to ``…:{new}:{ctx}`` (scored by seq, as
# ``idx``), and its score in ``upd:{tenant}:{agent}`` (by status time) becomes ``ms``.
# Returns the record's id, owner, tenant, agent, seq, ctx.
_MOVE = """
local function move(prefix, old, new, ms)
  local f = redis.call('HMGET', KEYS[1], 'id', 'owner', 'tenant', 'agent', 'seq', 'ctx')
  local base = prefix .. 'st:' .. f[3] .. ':' .. f[4] .. ':'
  local both = prefix .. 'cst:' .. f[3] .. ':' .. f[4] .. ':'
  redis.call('ZREM', base .. old, f[1])
  redis.call('ZADD', base .. new, f[5], f[1])
  redis.call('ZREM', both .. old .. ':' .. f[6], f[1])
  redis.call('ZADD', both .. new .. ':' .. f[6], f[5], f[1])
  redis.call('ZADD', prefix .. 'upd:' .. f[3] .. ':' .. f[4], ms, f[1])
  return f
end
"""

# Retention (store/retention.py): ``done:{tenant}`` holds the tenant's finished tasks scored
# by their end (Redis time, µs: scripts run one at a time, so each end has its own).
# ``finish`` adds one, then ``retain`` forgets the oldest while there are more than ``cap``
# or the oldest ended more than ``keep`` ms ago, at most ``batch``; ``forget`` deletes every
# key of a task: its record, its place in every index, its claim, its events, its push
# configs (and their place in ``push:active``), its cancel mark.
_RETAIN = """
local function forget(P, id)
  local k = P .. 'task:' .. id
  local f = redis.call('HMGET', k, 'tenant', 'agent', 'ctx', 'msg', 'state')
  if f[1] then
    local ta = f[1] .. ':' .. f[2]
    redis.call('ZREM', P .. 'idx:' .. ta, id)
    redis.call('ZREM', P .. 'ctx:' .. ta .. ':' .. f[3], id)
    redis.call('ZREM', P .. 'st:' .. ta .. ':' .. f[5], id)
    redis.call('ZREM', P .. 'cst:' .. ta .. ':' .. f[5] .. ':' .. f[3], id)
    redis.call('ZREM', P .. 'upd:' .. ta, id)
    local m = P .. 'msg:' .. ta .. ':' .. f[4]
    if redis.call('GET', m) == id then redis.call('DEL', m) end
  end
  local configs = redis.call('HKEYS', P .. 'push:' .. id)
  for i = 1, #configs do redis.call('SREM', P .. 'push:active', id .. '/' .. configs[i]) end
  redis.call('DEL', k, P .. 'ev:' .. id, P .. 'push:' .. id, P .. 'cancel:' .. id)
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function retain(P, done, cap, keep, batch)
  local cutoff = now_us() - keep * 1000
  local n = 0
  while n < batch do
    local oldest = redis.call('ZRANGE', done, 0, 0, 'WITHSCORES')
    if #oldest == 0 then break end
    if redis.call('ZCARD', done) <= cap and tonumber(oldest[2]) > cutoff then break end
    redis.call('ZREM', done, oldest[1])
    forget(P, oldest[1])
    n = n + 1
  end
  return n
end

local function finish(P, done, id, cap, keep, batch)
  redis.call('ZADD', done, now_us(), id)
  retain(P, done, cap, keep, batch)
end
"""

# KEYS: done:{tenant}   ARGV: key prefix, cap, retention ms, batch
RETAIN = _RETAIN + """
return retain(ARGV[1], KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]))
"""

# KEYS: task, idx, ctx, seq, msg, ev, runs, replicas, st (its state's), upd, cst, done
# ARGV: id, ctx, tenant, agent, msg, state, text, ms, created, hist, arts, owner,
#       bind ("1"/"0"), payload, terminal ("1"/"0"), retention ms, wire ('' unless terminal),
#       key prefix, the tenant's task retention ms, its cap, trim batch
# A finished task's record keeps its wire form (GetTask's answer, as it is) in 'wire',
# which holds its history and artifacts: 'hist' and 'arts' are dropped. A task refused at
# its creation keeps its message once: its first event's payload is '' (the store reads
# it as ``{"task": wire}``). ``create`` announces nothing: its callers do.
_CREATE = _RETAIN + """
local function create()
  local seq = redis.call('INCR', KEYS[4])
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'ctx', ARGV[2], 'tenant', ARGV[3],
             'agent', ARGV[4], 'msg', ARGV[5], 'state', ARGV[6], 'text', ARGV[7],
             'ms', ARGV[8], 'created', ARGV[9], 'seq', seq, 'hist', ARGV[10],
             'arts', ARGV[11], 'owner', ARGV[12], 'nev', 1)
  redis.call('ZADD', KEYS[2], seq, ARGV[1])
  redis.call('ZADD', KEYS[3], seq, ARGV[1])
  redis.call('ZADD', KEYS[9], seq, ARGV[1])
  redis.call('ZADD', KEYS[10], ARGV[8], ARGV[1])
  redis.call('ZADD', KEYS[11], seq, ARGV[1])
  if ARGV[13] == '1' then
    redis.call('SET', KEYS[5], ARGV[1])
  elseif redis.call('GET', KEYS[5]) == 'pending' then
    redis.call('DEL', KEYS[5])
  end
  redis.call('XADD', KEYS[6], '1-1', 'p', ARGV[14], 't', ARGV[15])
  if ARGV[15] == '1' then
    redis.call('HSET', KEYS[1], 'wire', ARGV[17])
    redis.call('HDEL', KEYS[1], 'hist', 'arts')
    redis.call('PEXPIRE', KEYS[6], ARGV[16])
    finish(ARGV[18], KEYS[12], ARGV[1], tonumber(ARGV[20]), tonumber(ARGV[19]),
           tonumber(ARGV[21]))
  else
    redis.call('ZADD', KEYS[7], ARGV[9], ARGV[1])
    redis.call('SADD', KEYS[8], ARGV[12])
  end
  return seq
end
"""

CREATE = _NOTIFY + _CREATE + """
local seq = create()
notify(ARGV[1], 1)
return seq
"""

# A new message's whole acceptance in one step: its messageId's claim, its tenant's
# admission (redis_limits), its task's creation, and its start (WORKING, the second event).
# KEYS: CREATE's (st and cst those of WORKING), then running, rate
# ARGV: CREATE's (state WORKING, ms the start's, text null; bind "1", terminal "0"), then
#       claimed ("1": the caller holds the messageId's pending claim), concurrency,
#       rate per minute, lease ms, the start's payload, maxlen
# Returns {0, seq} (created and started), {1, the id the messageId names, or 'pending'}
# (nothing done), or {2, what admission refused: 1 concurrency, 2 rate} (nothing stored:
# the claim is left free).
OPEN = _NOTIFY + _CREATE + ADMIT_FN + """
local found = redis.call('GET', KEYS[5])
local claimed = found == 'pending' and ARGV[22] == '1'
if found and not claimed then return {1, found} end
local code = admit(KEYS[13], KEYS[14], ARGV[1], tonumber(ARGV[23]), tonumber(ARGV[24]),
                   tonumber(ARGV[25]))
if code ~= 0 then
  if claimed then redis.call('DEL', KEYS[5]) end
  return {2, code}
end
local seq = create()
redis.call('HSET', KEYS[1], 'nev', 2)
redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[27], '2-1', 'p', ARGV[26], 't', '0')
notify(ARGV[1], 2)
return {0, seq}
"""

# KEYS: task, ev   ARGV: ms, payload, maxlen, key prefix
START = _NOTIFY + _MOVE + f"""
if redis.call('HGET', KEYS[1], 'state') ~= '{SUBMITTED}' then return 0 end
redis.call('HSET', KEYS[1], 'state', '{WORKING}', 'ms', ARGV[1], 'text', 'null')
local f = move(ARGV[4], '{SUBMITTED}', '{WORKING}', ARGV[1])
local n = redis.call('HINCRBY', KEYS[1], 'nev', 1)
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], n .. '-1', 'p', ARGV[2], 't', '0')
notify(f[1], n)
return 1
"""

# KEYS: task, ev   ARGV: payload, maxlen, n (the event's number in its run; 0: none)
# An event numbered at or below the task's 'wn' (the last number written) was written
# already (its answer lost, sent again): nothing is written twice.
APPEND = _NOTIFY + _TERMINAL + """
local s, id, wn = unpack(redis.call('HMGET', KEYS[1], 'state', 'id', 'wn'))
if not s or T[s] then return 0 end
local k = tonumber(ARGV[3])
if k > 0 then
  if k <= (tonumber(wn) or 0) then return 1 end
  redis.call('HSET', KEYS[1], 'wn', k)
end
local n = redis.call('HINCRBY', KEYS[1], 'nev', 1)
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], n .. '-1', 'p', ARGV[1], 't', '0')
notify(id, n)
return 1
"""

# KEYS: task, ev   ARGV: state, text, ms, arts ('' keeps them; with an answer: the other
#                        artifacts' JSON, comma-separated), retention ms, maxlen,
#                        key prefix, the wire form's head (the Task up to its status),
#                        the tenant's task retention ms, its cap, trim batch,
#                        first, count (the first count payloads are the run's numbered
#                        events from first: those at or below 'wn' are not written again),
#                        answer (the last artifact's JSON, sent once; '' none),
#                        at, tail (the payload at ARGV[at] is an event's text up to the
#                        answer, which the script completes with the answer and tail; 0 none),
#                        keep ("1": return the wire form),
#                        payloads… (the last one is the final event)
# The wire form is the head, then the artifacts and the history unless empty (the keys
# ``wire/task.task`` leaves out), as the record would be written: tests check the bytes.
# The task leaves its replica's runs and frees its tenant's admission slot (redis_limits),
# and joins its tenant's finished tasks (``done``, retention).
END = _NOTIFY + _TERMINAL + _MOVE + _RETAIN + """
local s = redis.call('HGET', KEYS[1], 'state')
if not s or T[s] then return 0 end
local arts, answer = ARGV[4], ARGV[14]
if answer ~= '' then
  if arts ~= '' then arts = arts .. ',' end
  arts = '[' .. arts .. answer .. ']'
elseif arts == '' then
  arts = redis.call('HGET', KEYS[1], 'arts')
end
local hist = redis.call('HGET', KEYS[1], 'hist')
local wire = ARGV[8]
if arts and arts ~= '[]' then wire = wire .. ',"artifacts":' .. arts end
if hist and hist ~= '[]' then wire = wire .. ',"history":' .. hist end
wire = wire .. '}'
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'text', ARGV[2], 'ms', ARGV[3], 'wire', wire)
redis.call('HDEL', KEYS[1], 'hist', 'arts')
local first, count = tonumber(ARGV[12]), tonumber(ARGV[13])
local wn = tonumber(redis.call('HGET', KEYS[1], 'wn')) or 0
local at = tonumber(ARGV[15])
for i = 18, #ARGV do
  local k = first + i - 18
  if i - 18 >= count or k > wn then
    local n = redis.call('HINCRBY', KEYS[1], 'nev', 1)
    local final = '0'
    if i == #ARGV then final = '1' end
    local p = ARGV[i]
    if i == at then p = p .. answer .. ARGV[16] end
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], n .. '-1', 'p', p, 't', final)
  end
end
redis.call('PEXPIRE', KEYS[2], ARGV[5])
local f = move(ARGV[7], s, ARGV[1], ARGV[3])
notify(f[1], redis.call('HGET', KEYS[1], 'nev'))
if f[2] then redis.call('ZREM', ARGV[7] .. 'runs:' .. f[2], f[1]) end
redis.call('ZREM', ARGV[7] .. 'running:' .. f[3], f[1])
finish(ARGV[7], ARGV[7] .. 'done:' .. f[3], f[1], tonumber(ARGV[10]), tonumber(ARGV[9]),
       tonumber(ARGV[11]))
if ARGV[17] == '1' then return wire end
return 1
"""

# KEYS: msg
RELEASE = """
if redis.call('GET', KEYS[1]) == 'pending' then redis.call('DEL', KEYS[1]) end
return 1
"""

# KEYS: task, mark   ARGV: channel, id, mark ttl ms
MARK = _TERMINAL + """
local s = redis.call('HGET', KEYS[1], 'state')
if not s or T[s] then return 0 end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
"""
