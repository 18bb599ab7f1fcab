-- make_store.lua PATH N RECORD_BYTES CODEC: a dense uint8 store of N
-- records (pseudo-random bytes, one xorshift stream) for the benchmarks.
local zr = require "zrecord"
local path, n, size, codec = arg[1], math.tointeger(tonumber(arg[2])), math.tointeger(tonumber(arg[3])), arg[4]
local s <close> = zr.create_dense(path, "uint8", { size }, codec)
local x = 88172645463325252
local chunk = {}
for i = 1, n do
  for k = 1, size // 8 do
    x = x ~ (x << 13); x = x ~ (x >> 7); x = x ~ (x << 17)
    chunk[k] = string.pack("<i8", x)
  end
  s:append(table.concat(chunk, "", 1, size // 8) .. string.rep("\0", size % 8))
end
