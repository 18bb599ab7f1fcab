-- make_plan.lua N BATCH ROUNDS SEED: ROUNDS + 1 lines of BATCH random
-- indices in [0, N) (the extra line is the warm-up), on stdout.
local n, batch, rounds, seed = math.tointeger(tonumber(arg[1])), math.tointeger(tonumber(arg[2])),
  math.tointeger(tonumber(arg[3])), math.tointeger(tonumber(arg[4]))
math.randomseed(seed)
for _ = 0, rounds do
  local t = {}
  for k = 1, batch do t[k] = math.random(0, n - 1) end
  print(table.concat(t, " "))
end
