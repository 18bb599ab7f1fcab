-- gather.lua STORE PLAN ROUNDS: the Lua side of bench/bindings/run.sh.
-- Prints "lua <batch> <record_bytes> <s per gather> <MB/s>" for gather_into
-- a reused zrecord buffer, and "lua-string ..." for gather to a new string.
local zr = require "zrecord"
local store, plan, rounds = arg[1], arg[2], math.tointeger(tonumber(arg[3]))
local batches = {}
for line in io.lines(plan) do
  local t = {}
  for x in line:gmatch("%S+") do t[#t + 1] = math.tointeger(tonumber(x)) end
  batches[#batches + 1] = t
end
local s <close> = zr.open(store)
local batch = #batches[1]
local buf = zr.buffer(batch * s.record_size)
-- Lua has no sub-second wall clock (os.clock is CPU time, which misses
-- the gather's worker threads): read date(1) before and after the loop;
-- the two forks cost about a millisecond over the whole run.
local function now()
  local p = io.popen("date +%s.%N")
  local t = tonumber(p:read("l"))
  p:close()
  return t
end
s:gather_into(buf, batches[1])
local t0 = now()
for r = 1, rounds do s:gather_into(buf, batches[r]) end
local per = (now() - t0) / rounds
print(string.format("lua %d %d %.9f %.1f", batch, s.record_size, per, batch * s.record_size / per / 1e6))
t0 = now()
for r = 1, rounds do local _ = s:gather(batches[r]) end
per = (now() - t0) / rounds
print(string.format("lua-string %d %d %.9f %.1f", batch, s.record_size, per, batch * s.record_size / per / 1e6))
