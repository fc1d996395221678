-- wrk script: POST one JSON-RPC body to /, with A2A-Version: 1.0.
--
-- Environment (set by bench/run.py):
--   WRK_BODY   the request body; each %ID% in it becomes a fresh token per request:
--              WRK_RUN (one token per wrk run), the thread's number and its count
--   WRK_COUNT  "1": read each answer and count task states and JSON-RPC error codes
--   WRK_PATH   the path to post to (default /); WRK_API_KEY: sent as X-API-Key (the hub)
-- At the end, one line "WRKJSON {...}" carries the numbers bench/run.py reads.

local template = os.getenv("WRK_BODY") or '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"tsk_x"}}'
local count = os.getenv("WRK_COUNT") == "1"
local prefix, suffix = template:match("^(.-)%%ID%%(.*)$")
local run = os.getenv("WRK_RUN") or "0"

wrk.method = "POST"
wrk.path = os.getenv("WRK_PATH") or "/"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
wrk.body = template
local api_key = os.getenv("WRK_API_KEY")
if api_key then
   wrk.headers["X-API-Key"] = api_key
end

local threads = {}
local next_thread = 0

function setup(thread)
   next_thread = next_thread + 1
   thread:set("tid", next_thread)
   table.insert(threads, thread)
end

local n = 0
-- Globals: done() reads them from each thread with thread:get().
states = {}
errors = {}
unparsed = 0

if prefix then
   request = function()
      n = n + 1
      return wrk.format(nil, nil, nil, prefix .. run .. "-" .. tid .. "-" .. n .. suffix)
   end
end

local function bump(tbl, key)
   tbl[key] = (tbl[key] or 0) + 1
end

if count then
   response = function(status, headers, body)
      local state = body:match('"state":"TASK_STATE_([%u_]+)"')
      if state then
         bump(states, state)
      else
         local code = body:match('"error":{"code":(%-?%d+)')
         if code then bump(errors, code) else unparsed = unparsed + 1 end
      end
   end
end

local function encode_counts(tbl)
   local parts = {}
   for k, v in pairs(tbl) do
      table.insert(parts, string.format('"%s":%d', k, v))
   end
   return "{" .. table.concat(parts, ",") .. "}"
end

local function merge(into, tbl)
   for k, v in pairs(tbl or {}) do into[k] = (into[k] or 0) + v end
end

function done(summary, latency, requests)
   local all_states, all_errors, all_unparsed = {}, {}, 0
   for _, thread in ipairs(threads) do
      merge(all_states, thread:get("states"))
      merge(all_errors, thread:get("errors"))
      all_unparsed = all_unparsed + (thread:get("unparsed") or 0)
   end
   local e = summary.errors
   io.write(string.format(
      'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latency_us":{"mean":%.1f,"stdev":%.1f,"max":%d,"p50":%d,"p90":%d,"p99":%d},' ..
      '"states":%s,"rpc_errors":%s,"unparsed":%d}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency.mean, latency.stdev, latency.max,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      encode_counts(all_states), encode_counts(all_errors), all_unparsed))
end
