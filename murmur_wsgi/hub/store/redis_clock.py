"""Redis's clock in the store's Lua scripts: one ``TIME`` per script run.

``CLOCK_FN`` opens every script that reads the time (redis_scripts, redis_limits,
redis_push_scripts): ``now_ms()`` and ``now_us()`` are the Redis time, in ms and µs, of
the script's first read of it, the same for the whole run. Scripts run one at a time, so
a script's instant is still its own: two ends never share a ``now_us()`` (retention's
``done`` scores), and a lease or a watch is measured from when its script ran.

PERF: one ``TIME`` per script instead of one per reading: a blocking SendMessage's END
read it twice (each a ``redis.call``, ~3 µs of Redis's CPU), push's ``DUE`` once per
task it watches.

``TERMINAL_FN`` (beside it: what the scripts share) is the table ``T`` of the final states,
``T[state]`` 1 for each.
"""
from __future__ import annotations

from murmur_wsgi.hub.task import TERMINAL

CLOCK_FN = """
local clock_t
local function clock()
  if not clock_t then clock_t = redis.call('TIME') end
  return clock_t
end
local function now_ms()
  local t = clock()
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function now_us()
  local t = clock()
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
"""

TERMINAL_FN = "local T = {" + ", ".join(f"['{s}'] = 1" for s in sorted(TERMINAL)) + "}\n"
