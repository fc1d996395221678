"""The Redis store's scripts that read a task's log for its streams (``redis_events``).

A stream's read marks its task *watched* (the record's field ``w``, Redis time in ms, in
the future), so the scripts that write its events announce them (``redis_scripts``); the
workers whose streams read it renew the mark (``WATCH``). A read takes a page of the log
(``_PAGE``), bounded in events and in bytes. A task's record is read by a script that
sends a large one's size instead (``record_script``).
"""
from __future__ import annotations

from murmur_wsgi.hub.store.redis_clock import CLOCK_FN

# The task watched for ``ARGV`` ms more, unless it is for half of that already (and only
# if it exists: nothing is created). KEYS: task
_WATCH = CLOCK_FN + """
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

# A page of a task's log: its entries from an entry id on, at most ``count``, and none
# after the one whose payloads (``p``) bring the page to ``bytes``; whether the log exists;
# 1 when the page stopped at either bound (the log may go on). An entry whose payload alone
# passes ``bytes`` ends the page before it; first, it is not sent: its size is, fourth
# (``redis_events`` reads it once the worker has room). PERF: one XRANGE, cut (an XRANGE
# an entry, never holding more than the page, cost Redis 13 times the CPU).
_PAGE = """
local function page(ev, start, count, bytes)
  local entries = redis.call('XRANGE', ev, start, '+', 'COUNT', count)
  local size = 0
  for i = 1, #entries do
    local fields = entries[i][2]
    local one = 0
    for j = 1, #fields, 2 do
      if fields[j] == 'p' then one = one + #fields[j + 1] end
    end
    if one > bytes then
      if i == 1 then return {{}, 1, 1, one} end
      for k = #entries, i, -1 do entries[k] = nil end
      return {entries, 1, 1}
    end
    size = size + one
    if size >= bytes and i < #entries then
      for k = #entries, i + 1, -1 do entries[k] = nil end
      return {entries, 1, 1}
    end
  end
  return {entries, redis.call('EXISTS', ev), #entries >= count and 1 or 0}
end
"""

# A stream's read of a page (``_PAGE``), read-only (sent as a task's record is:
# ``redis_reads.READ_ONLY``). KEYS: ev   ARGV: the first entry id, count, bytes
PAGE = _PAGE + """
return page(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))
"""

# … and the task watched (``_WATCH``) in the same step: an event written after it is
# announced. KEYS: task, ev   ARGV: the first entry id, watch ms, count, bytes
READ = _WATCH + _PAGE + """
watch(tonumber(ARGV[2]))
return page(KEYS[2], ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4]))
"""


def record_script(fields: tuple, forms: tuple) -> str:
    """A task's record: its ``fields``, as ``HMGET`` answers them, when its stored ``forms``
    (the fields its size is made of) are at most ``ARGV[1]`` bytes together; else that size
    alone, an integer, and nothing else sent (``large_reads``). KEYS: task   ARGV: bytes"""
    sizes = " + ".join(f"redis.call('HSTRLEN', KEYS[1], '{form}')" for form in forms)
    names = ", ".join(f"'{field}'" for field in fields)
    return f"""
local size = {sizes}
if size > tonumber(ARGV[1]) then return size end
return redis.call('HMGET', KEYS[1], {names})
"""
