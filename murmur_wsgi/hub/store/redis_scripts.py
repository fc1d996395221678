"""The Redis store's Lua scripts: each store step that must be atomic is one script.

A task's record is the hash ``task:<id>``; its events are the stream
``ev:<id>`` whose entry ids are ``<n>-1`` (n = 1, 2, …: the event's position,
counted in the hash's field ``nev``). Every script that writes an event checks
the task's state first, so an event is never written after the final one.

Every key a script touches is one of its ``KEYS``, all in the slot of the task's
tenant (redis_keys): no script builds a key name (tests/hub/test_redis_slots.py
checks it). What a step does beside the tenant's keys (the replica's runs, push's
active configs: the hub's slot) is its caller's, before or after the script, with one
exception: on one Redis ``OPEN`` is given the replica's runs too, and lists the run
itself (a Redis that keeps a script to one slot refuses that, and the store sends them
first from then on: redis.py's ``_open``).
"""
from __future__ import annotations

from murmur_wsgi.hub.store.redis_clock import CLOCK_FN, TERMINAL_FN
from murmur_wsgi.hub.store.redis_keys import EVENTS
from murmur_wsgi.hub.store.redis_limits import ADMIT_FN
# NOTE: the store loads every script of its own from this module: the reads' too.
from murmur_wsgi.hub.store.redis_read_scripts import PAGE, READ, WATCH  # noqa: F401
from murmur_wsgi.hub.store.redis_retain_scripts import (  # noqa: F401
    BYTES_BATCH, DOOMED, FORGET, FORGET_KEYS, RETAIN_FN)
from murmur_wsgi.hub.task import SUBMITTED, WORKING

# Every event written to a watched task is announced on ``EVENTS`` as ``<task id> <n>``
# (redis_feed). A task is watched while its record's field ``w`` (Redis time, ms) is in the
# future: every read of a stream sets it (``READ``) and the readers' workers renew it
# (``WATCH``), so a task no stream reads costs its events no message. KEYS[1]: the record;
# ``w``: its field ``w`` when the script has read it already (false: it has none).
# Every script opens with the clock (redis_clock): this fragment brings it.
_NOTIFY = CLOCK_FN + """
local function notify(id, n, w)
  if w == nil then w = redis.call('HGET', KEYS[1], 'w') end
  if w and tonumber(w) > now_ms() then
    redis.call('PUBLISH', '""" + EVENTS + """', id .. ' ' .. n)
  end
end
"""

_TERMINAL = TERMINAL_FN

# How many of a run's numbered events, before its event ``k`` (0: not numbered), the task
# lacks: those between the last it wrote ('wn') and ``k``, which this Redis acknowledged
# and no longer holds (APPEND, END).
_LOST = """
local function lost(k, wn)
  if k > wn + 1 then return k - wn - 1 end
  return 0
end
"""

# A task changes state: its id moves from its old state's ``st:`` set to the new one's and
# from its old ``cst:`` set to the new one's (scored by seq, as ``idx``), and its score in
# ``upd`` (by status time) becomes ``ms``. Every key is the caller's (KEYS).
_MOVE = """
local function move(st_old, st_new, cst_old, cst_new, upd, id, seq, ms)
  redis.call('ZREM', st_old, id)
  redis.call('ZADD', st_new, seq, id)
  redis.call('ZREM', cst_old, id)
  redis.call('ZADD', cst_new, seq, id)
  redis.call('ZADD', upd, ms, id)
end
"""

# KEYS: task, idx, ctx, seq, msg, ev, st (its state's), upd, cst, done, sizes, bytes
# ARGV: id, ctx, tenant, agent, msg, state, text, ms, created, hist, arts, owner,
#       bind ("1"/"0"), payload, terminal ("1"/"0"), retention ms, wire ('' unless terminal),
#       the tenant's task retention ms, its cap, trim batch, max bytes
# A finished task's record keeps its wire form (GetTask's answer, as it is) in 'wire',
# which holds its history and artifacts: 'hist' and 'arts' are dropped. The record's 'eb'
# counts the bytes of the events written (every script that writes one adds its own). A task refused at
# its creation keeps its message once: its first event's payload is '' (the store reads
# it as ``{"task": wire}``). ``create`` announces nothing: its callers do. It returns the
# task's seq and the tenant's tasks to forget now (``doomed``; none unless terminal).
# ``nev`` and ``eb`` (optional): the record's, when its caller writes more events than
# the first (PERF: written once, not rewritten by a second HSET: one ``redis.call``).
_CREATE = RETAIN_FN + """
local function create(nev, eb)
  local seq = redis.call('INCR', KEYS[4])
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'ctx', ARGV[2], 'tenant', ARGV[3],
             'agent', ARGV[4], 'msg', ARGV[5], 'state', ARGV[6], 'text', ARGV[7],
             'ms', ARGV[8], 'created', ARGV[9], 'seq', seq, 'hist', ARGV[10],
             'arts', ARGV[11], 'owner', ARGV[12], 'nev', nev or 1, 'eb', eb or #ARGV[14])
  redis.call('ZADD', KEYS[2], seq, ARGV[1])
  redis.call('ZADD', KEYS[3], seq, ARGV[1])
  redis.call('ZADD', KEYS[7], seq, ARGV[1])
  redis.call('ZADD', KEYS[8], ARGV[8], ARGV[1])
  redis.call('ZADD', KEYS[9], seq, ARGV[1])
  if ARGV[13] == '1' then
    redis.call('SET', KEYS[5], ARGV[1])
  elseif redis.call('GET', KEYS[5]) == 'pending' then
    redis.call('DEL', KEYS[5])
  end
  redis.call('XADD', KEYS[6], '1-1', 'p', ARGV[14], 't', ARGV[15])
  local gone = {}
  if ARGV[15] == '1' then
    redis.call('HSET', KEYS[1], 'wire', ARGV[17])
    redis.call('HDEL', KEYS[1], 'hist', 'arts')
    redis.call('PEXPIRE', KEYS[6], ARGV[16])
    gone = finish(KEYS[10], KEYS[11], KEYS[12], ARGV[1], #ARGV[17] + #ARGV[14],
                  tonumber(ARGV[19]), tonumber(ARGV[18]), tonumber(ARGV[20]),
                  tonumber(ARGV[21]))
  end
  return seq, gone
end
"""

# A record of this very task and creation (its id and ``created`` this call's) is its own,
# sent again after its reply was lost with its connection: its seq, nothing written twice.
CREATE = _NOTIFY + _CREATE + """
local id, created, was = unpack(redis.call('HMGET', KEYS[1], 'id', 'created', 'seq'))
if id == ARGV[1] and created == ARGV[9] then return {was, {}} end
local seq, gone = create()
notify(ARGV[1], 1)
return {seq, gone}
"""

# A new message's whole acceptance in one step: its messageId's claim, its tenant's
# admission (redis_limits), its task's creation, and its start (WORKING, the second event).
# KEYS: CREATE's (st and cst those of WORKING), then running, rate; on one Redis (not a
#       cluster, where they are in the hub's slot) then the replica's runs and replicas
# ARGV: CREATE's (state WORKING, ms the start's, text null; bind "1", terminal "0"), then
#       claimed ("1": the caller holds the messageId's pending claim), concurrency,
#       rate per minute, lease ms, the start's payload, maxlen; with the runs' keys, the
#       run's member in them
# The run enters its replica's runs (with the replica, ``replicas``) before its task is
# created, when both keys are given (else its caller put it there first).
# Returns {0, seq} (created and started), {1, the id the messageId names, or 'pending'}
# (nothing done), or {2, what admission refused: 1 concurrency, 2 rate} (nothing stored:
# the claim is left free). A claim that names this very task (its id the caller's, fresh)
# is this call's own, sent again after its reply was lost with its connection: {0, seq}.
OPEN = _NOTIFY + _CREATE + ADMIT_FN + """
local found = redis.call('GET', KEYS[5])
local claimed = found == 'pending' and ARGV[22] == '1'
if found == ARGV[1] then return {0, redis.call('HGET', KEYS[1], 'seq')} end
if found and not claimed then return {1, found} end
local code = admit(KEYS[13], KEYS[14], ARGV[1], tonumber(ARGV[23]), tonumber(ARGV[24]),
                   tonumber(ARGV[25]))
if code ~= 0 then
  if claimed then redis.call('DEL', KEYS[5]) end
  return {2, code}
end
if #KEYS > 14 then
  redis.call('ZADD', KEYS[15], ARGV[9], ARGV[28])
  redis.call('SADD', KEYS[16], ARGV[12])
end
local seq = create(2, #ARGV[14] + #ARGV[26])
redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[27], '2-1', 'p', ARGV[26], 't', '0')
-- NOTE: its two events are not announced (``notify``): the task is new (its id the
-- hub's, fresh: messages.accept; an OPEN that finds its messageId's claim taken creates
-- nothing), and nothing watches a task before its record exists (``_WATCH`` sets no
-- ``w`` then), so no announcement could be due (PERF: its HGET, never publishing).
return {0, seq}
"""

# KEYS: task, ev, then the move's: st (SUBMITTED, WORKING), cst (SUBMITTED, WORKING), upd
# ARGV: ms, payload, maxlen
# PERF: the record read once and written once (its counts computed here): 8 redis.calls,
# not 12 (APPEND likewise: 3, not 5 or 6).
START = _NOTIFY + _MOVE + f"""
local s, id, seq, nev, eb, w = unpack(redis.call('HMGET', KEYS[1],
  'state', 'id', 'seq', 'nev', 'eb', 'w'))
if s ~= '{SUBMITTED}' then return 0 end
local n = (tonumber(nev) or 0) + 1
redis.call('HSET', KEYS[1], 'state', '{WORKING}', 'ms', ARGV[1], 'text', 'null', 'nev', n,
           'eb', (tonumber(eb) or 0) + #ARGV[2])
move(KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], id, seq, ARGV[1])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], n .. '-1', 'p', ARGV[2], 't', '0')
notify(id, n, w)
return 1
"""

# KEYS: task, ev   ARGV: payload, maxlen, n (the event's number in its run; 0: none)
# An event numbered at or below the task's 'wn' (the last number written) was written
# already (its answer lost, sent again): nothing is written twice. One numbered past the
# next (``lost``) follows events this Redis acknowledged and no longer holds (restarted
# from an older snapshot, an asynchronous replica promoted): their positions are left
# empty, so a stream meets the loss as a trimmed log's (the stored Task, then on), never
# as a silent gap.
APPEND = _NOTIFY + _TERMINAL + _LOST + """
local s, id, wn, nev, eb, w = unpack(redis.call('HMGET', KEYS[1],
  'state', 'id', 'wn', 'nev', 'eb', 'w'))
if not s or T[s] then return 0 end
local k = tonumber(ARGV[3])
wn = tonumber(wn) or 0
if k > 0 and k <= wn then return 1 end
local n, bytes = (tonumber(nev) or 0) + 1 + lost(k, wn), (tonumber(eb) or 0) + #ARGV[1]
if k > 0 then
  redis.call('HSET', KEYS[1], 'wn', k, 'nev', n, 'eb', bytes)
else
  redis.call('HSET', KEYS[1], 'nev', n, 'eb', bytes)
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], n .. '-1', 'p', ARGV[1], 't', '0')
notify(id, n, w)
return 1
"""

END_KEYS = ("task", "ev", "st SUBMITTED", "st WORKING", "st new", "cst SUBMITTED",
            "cst WORKING", "cst new", "upd", "running", "done", "sizes", "bytes")
# KEYS: END_KEYS (st and cst: the task's sets in each state it may leave, and the new one's)
# ARGV: state, text, ms, arts ('' keeps them; with an answer: the other artifacts' JSON,
#       comma-separated), retention ms, maxlen, the wire form's head (the Task up to its
#       status), the tenant's task retention ms, its cap, trim batch, max bytes,
#       first, count (the first count payloads are the run's numbered events from first:
#       those at or below 'wn' are not written again),
#       answer (the last artifact's JSON, sent once; '' none),
#       at, tail (the payload at ARGV[at] is an event's text up to the answer, which the
#       script completes with the answer and tail; 0 none),
#       keep ("1": return the wire form),
#       payloads… (the last one is the final event)
# The wire form is the head, then the artifacts and the history unless empty (the keys
# ``wire/task.task`` leaves out), as the record would be written: tests check the bytes.
# The task frees its tenant's admission slot (redis_limits) and joins its tenant's
# finished tasks (``done``, retention), with its bytes (its wire form's and its events': the
# record's ``eb`` and those written here; its push configs': the record's ``pb``); its
# replica takes it out of its runs (the hub's key) once this has answered. Returns 0 (the
# task had ended: nothing written), or {the wire form (keep) or 1, the tenant's tasks to
# forget now} (none when the task had ended with this very end: sent again).
END = _NOTIFY + _TERMINAL + _LOST + _MOVE + RETAIN_FN + f"""
-- PERF: the record read once (one HMGET: it was four HGETs and an HMGET) and written
-- once (its event count kept here, not one HINCRBY per event), ``w`` given to notify:
-- with the clock's one TIME (redis_clock), a blocking SendMessage's END makes 18
-- redis.calls, not 25.
local s, hist, rarts, wn, id, seq, nev, eb, pb, w = unpack(redis.call('HMGET', KEYS[1],
  'state', 'hist', 'arts', 'wn', 'id', 'seq', 'nev', 'eb', 'pb', 'w'))
if not s then return 0 end
if T[s] then
  -- NOTE: this very end (its state, time and text), sent again after its reply was lost
  -- with its connection: answered as written, nothing written twice.
  local ms, text, ended = unpack(redis.call('HMGET', KEYS[1], 'ms', 'text', 'wire'))
  if s ~= ARGV[1] or ms ~= ARGV[3] or text ~= ARGV[2] then return 0 end
  if ARGV[17] == '1' then return {{ended, {{}}}} end
  return {{1, {{}}}}
end
local st_old, cst_old
if s == '{SUBMITTED}' then
  st_old, cst_old = KEYS[3], KEYS[6]
elseif s == '{WORKING}' then
  st_old, cst_old = KEYS[4], KEYS[7]
else
  return redis.error_reply('END: a task in state ' .. s)
end
local arts, answer = ARGV[4], ARGV[14]
if answer ~= '' then
  if arts ~= '' then arts = arts .. ',' end
  arts = '[' .. arts .. answer .. ']'
elseif arts == '' then
  arts = rarts
end
local wire = ARGV[7]
if arts and arts ~= '[]' then wire = wire .. ',"artifacts":' .. arts end
if hist and hist ~= '[]' then wire = wire .. ',"history":' .. hist end
wire = wire .. '}}'
local first, count = tonumber(ARGV[12]), tonumber(ARGV[13])
wn = tonumber(wn) or 0
local at, size, n = tonumber(ARGV[15]), #wire, (tonumber(nev) or 0) + lost(first, wn)
for i = 18, #ARGV do
  local k = first + i - 18
  if i - 18 >= count or k > wn then
    n = n + 1
    local final = '0'
    if i == #ARGV then final = '1' end
    local p = ARGV[i]
    if i == at then p = p .. answer .. ARGV[16] end
    size = size + #p
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], n .. '-1', 'p', p, 't', final)
  end
end
local record = {{'state', ARGV[1], 'text', ARGV[2], 'ms', ARGV[3], 'wire', wire}}
if n ~= (tonumber(nev) or 0) then record[9], record[10] = 'nev', n end
redis.call('HSET', KEYS[1], unpack(record))
redis.call('HDEL', KEYS[1], 'hist', 'arts')
redis.call('PEXPIRE', KEYS[2], ARGV[5])
size = size + (tonumber(eb) or 0)
if n > tonumber(ARGV[6]) then
  -- more events than the log keeps (MAXLEN): the bytes are those it holds
  size = #wire
  for _, e in ipairs(redis.call('XRANGE', KEYS[2], '-', '+')) do size = size + #e[2][2] end
end
size = size + (tonumber(pb) or 0)     -- its push configs' (redis_push_scripts)
move(st_old, KEYS[5], cst_old, KEYS[8], KEYS[9], id, seq, ARGV[3])
notify(id, n, w)
redis.call('ZREM', KEYS[10], id)
local gone = finish(KEYS[11], KEYS[12], KEYS[13], id, size,
                    tonumber(ARGV[9]), tonumber(ARGV[8]), tonumber(ARGV[10]),
                    tonumber(ARGV[11]))
if ARGV[17] == '1' then return {{wire, gone}} end
return {{1, gone}}
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
