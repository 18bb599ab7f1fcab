-- The Lua side of the cross-language determinism test: for every case of
-- cases.txt, the loader's steps as `<step> <indices> <sha256>` lines into
-- OUT/<case>.lua (see run.sh). Usage: lua5.4 cross.lua CASES STORES OUT
local zr = require "zrecord"

-- ---------------------------------------------------------------- SHA-256
local K = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}
local M32 = 0xffffffff
local function ror(x, n) return ((x >> n) | (x << (32 - n))) & M32 end

local function sha256(msg)
  local bits = #msg * 8
  msg = msg .. "\128" .. string.rep("\0", (55 - #msg) % 64) .. string.pack(">I8", bits)
  local h = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 }
  local w = {}
  for off = 1, #msg, 64 do
    for i = 0, 15 do w[i] = string.unpack(">I4", msg, off + 4 * i) end
    for i = 16, 63 do
      local s0 = ror(w[i - 15], 7) ~ ror(w[i - 15], 18) ~ (w[i - 15] >> 3)
      local s1 = ror(w[i - 2], 17) ~ ror(w[i - 2], 19) ~ (w[i - 2] >> 10)
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) & M32
    end
    local a, b, c, d, e, f, g, hh = table.unpack(h)
    for i = 0, 63 do
      local t1 = (hh + (ror(e, 6) ~ ror(e, 11) ~ ror(e, 25)) + ((e & f) ~ (~e & g & M32)) + K[i + 1] + w[i]) & M32
      local t2 = ((ror(a, 2) ~ ror(a, 13) ~ ror(a, 22)) + ((a & b) ~ (a & c) ~ (b & c))) & M32
      hh, g, f, e, d, c, b, a = g, f, e, (d + t1) & M32, c, b, a, (t1 + t2) & M32
    end
    local v = { a, b, c, d, e, f, g, hh }
    for i = 1, 8 do h[i] = (h[i] + v[i]) & M32 end
  end
  return string.format(string.rep("%08x", 8), table.unpack(h))
end
assert(sha256("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")

-- ------------------------------------------------------------------ cases
local INTS = { batch_size = 1, seed = 1, rank = 1, world_size = 1, steps = 1, pass = 1, shuffle = 1,
               drop_last = 1, epoch = 1, even_batches = 1, window = 1, pack_length = 1,
               pack_window = 1, concat = 1, num_workers = 1 }

local function parse(path)
  local cases = {}
  for line in io.lines(path) do
    if line:match("%S") and not line:match("^%s*#") then
      local name, c = nil, {}
      for tok in line:gmatch("%S+") do
        if name == nil then name = tok
        else
          local k, v = tok:match("^([^=]+)=(.*)$")
          c[k] = INTS[k] and math.tointeger(tonumber(v)) or v
        end
      end
      cases[#cases + 1] = { name = name, c = c }
    end
  end
  return cases
end

local function batch_line(b, names, pack)
  local keys = {}
  for _, n in ipairs(names) do keys[#keys + 1] = n end
  if pack then
    for _, k in ipairs({ "segment_ids", "positions", "seq_lens", "cu_seqlens" }) do keys[#keys + 1] = k end
  end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = b[k] end
  return string.format("%d %s %s\n", b.step, table.concat(b.indices, ","), sha256(table.concat(parts)))
end

local function run(c, stores)
  local names, streams, opened = {}, {}, {}
  for n in c.streams:gmatch("[^,]+") do names[#names + 1] = n end
  if c.mixture then
    -- source:weight,...: stream S of source K is the store K.S; lists
    -- keep the sources in the order of the case, as C and Python do
    local sources, weights = {}, {}
    for src, w in c.mixture:gmatch("([^,:]+):([^,]+)") do
      local ds = {}
      for _, n in ipairs(names) do ds[n] = stores .. "/" .. src .. "." .. n end
      sources[#sources + 1], weights[#weights + 1] = ds, tonumber(w)
    end
    streams = zr.mixture(sources, weights)
    opened[1] = streams
  else
    for _, n in ipairs(names) do
      local s
      if c.concat == 1 then
        s = zr.concat({ stores .. "/" .. n .. ".shard0", stores .. "/" .. n .. ".shard1",
                        stores .. "/" .. n .. ".shard2" })
      else
        s = zr.open(stores .. "/" .. n, { readonly = true })
      end
      streams[n] = s
      opened[#opened + 1] = s
    end
  end
  local o = { batch_size = c.batch_size, seed = c.seed or 0, rank = c.rank or 0,
              world_size = c.world_size or 1, num_workers = c.num_workers or 1, mode = c.mode }
  for _, k in ipairs({ "shuffle", "drop_last", "even_batches" }) do
    if c[k] then o[k] = c[k] == 1 end
  end
  o.epoch = c.epoch
  if c.mode == "pack" then
    o.pack_length, o.pack_policy, o.pack_window, o.pack_overlong =
      c.pack_length, c.pack_policy, c.pack_window, c.pack_overlong
  elseif c.mode == "bucket" then
    local f = assert(io.open(stores .. "/lengths.u32", "rb"))
    local raw = f:read("a")
    f:close()
    local lengths = {}
    for k = 0, #raw // 4 - 1 do lengths[k + 1] = string.unpack("<I4", raw, 4 * k + 1) end
    o.lengths, o.window = lengths, c.window
  end
  local out = {}
  local l = c.pass == 1 and zr.pass_loader(streams, o) or zr.loader(streams, o)
  if c.pass == 1 then
    for b in l:batches() do out[#out + 1] = batch_line(b, names, c.mode == "pack") end
  else
    for _ = 1, c.steps do out[#out + 1] = batch_line(l:next(), names, c.mode == "pack") end
  end
  l:close()
  for _, s in ipairs(opened) do s:close() end
  return table.concat(out)
end

local cases_path, stores, outdir = arg[1], arg[2], arg[3]
for _, case in ipairs(parse(cases_path)) do
  local f = assert(io.open(outdir .. "/" .. case.name .. ".lua", "wb"))
  f:write(run(case.c, stores))
  f:close()
end
