-- Stores from Lua: dense and ragged round trips, reopen, stats, buffers.
local T = require "testlib"
local zr = require "zrecord"

local function rec(i, n)
  local t = {}
  for k = 1, n do t[k] = string.char((i * 7 + k) % 256) end
  return table.concat(t)
end

T.test("module", function()
  T.eq(type(zr.version), "string", "version")
  T.eq(swig_type, nil, "no SWIG globals left behind")
  T.eq(math.type(zr.raw.ZRS_FLOAT32), "integer", "enum constants are integers")
  T.eq(zr.itemsize("float32"), 4, "itemsize")
  T.eq(zr.itemsize("<c16"), 16, "itemsize")
  -- every numpy-style name is the C parser's (zrs_dtype_from_name)
  T.eq(zr.itemsize("f8"), 8, "itemsize of a code without byte order")
  T.eq(zr.itemsize("bool"), 1, "itemsize of a name")
  T.raises("^EINVAL: dtype: '>f4' is big%-endian; records are stored little%-endian", zr.itemsize, ">f4")
  T.raises("^EINVAL: dtype: unsupported dtype 'float'", zr.itemsize, "float")
  T.eq(#zr.DTYPES, 14, "dtype set")
end)

for _, codec in ipairs({ "raw", "zstd" }) do
  T.test("dense round trip " .. codec, function()
    local s <close> = zr.create_dense(T.path("d"), "uint8", { 2, 3 }, codec)
    T.eq(s.kind, "dense"); T.eq(s.dtype, "|u1"); T.eq(s.codec, codec); T.eq(s.record_size, 6)
    T.eq(#s.item_shape, 2); T.eq(s.item_shape[2], 3)
    T.eq(s:append(rec(0, 6) .. rec(1, 6) .. rec(2, 6)), 0, "first index")
    T.eq(s:append(rec(3, 6)), 3, "first index of the second append")
    T.eq(#s, 4, "#store"); T.eq(math.type(#s), "integer")
    T.eq(s:gather({ 3, -4, 2, 3 }), rec(3, 6) .. rec(0, 6) .. rec(2, 6) .. rec(3, 6), "gather")
    T.eq(s:gather({}), "", "empty gather")
    T.eq(s:get(-1), rec(3, 6), "get")
    local buf = zr.buffer(12)
    T.eq(#buf, 12)
    T.eq(s:gather_into(buf, { 1, 0 }):tostring(), rec(1, 6) .. rec(0, 6), "gather_into")
    T.eq(buf:byte(1), string.byte(rec(1, 6), 1))
    local st = s:stats()
    T.eq(st.records, 4); T.eq(st.logical_bytes, 24); T.eq(math.type(st.chunk_bytes), "integer")
    s:sync()
  end)
end

T.test("scalar store and append from a buffer", function()
  local s <close> = zr.create_dense(T.path("d"), "<i8", {}, "raw")
  T.eq(s.record_size, 8)
  local b = zr.buffer(16)
  b:fill(string.pack("<i8<i8", -5, math.maxinteger))
  s:append(b)
  local a, c = string.unpack("<i8<i8", s:gather({ 0, 1 }))
  T.eq(a, -5); T.eq(c, math.maxinteger)
end)

T.test("reopen keeps identity and records", function()
  local p = T.path("d")
  do
    local s <close> = zr.create_dense(p, "float32", { 4 }, nil)
    s:append(string.pack("<ffff", 1, 2, 3, 4))
  end -- closed here by <close>
  local s <close> = zr.open(p)
  T.eq(s.kind, "dense"); T.eq(s.dtype, "<f4"); T.eq(s.codec, "zstd"); T.eq(#s, 1)
  T.eq(select(3, string.unpack("<ffff", s:get(0))), 3.0)
end)

T.test("ragged round trip", function()
  local s <close> = zr.create_ragged(T.path("r"), "<i4", "zstd")
  local first = s:append({
    { shape = { 2, 2 }, data = string.pack("<i4<i4<i4<i4", 1, 2, 3, 4) },
    { shape = {}, data = string.pack("<i4", 7) },
  })
  T.eq(first, 0)
  T.eq(s:append({ shape = { 3 }, data = string.pack("<i4<i4<i4", 8, 9, 10) }), 2, "single record")
  local got = s:gather({ 2, 0, 1 })
  T.eq(#got, 3)
  T.eq(#got[1].shape, 1); T.eq(got[1].shape[1], 3)
  T.eq(got[1].data, string.pack("<i4<i4<i4", 8, 9, 10))
  T.eq(got[2].shape[1], 2); T.eq(got[2].shape[2], 2)
  T.eq(#got[3].shape, 0, "scalar record"); T.eq(string.unpack("<i4", got[3].data), 7)
  T.eq(s:get(-1).shape[1], 3)
end)

T.test("handles close on __gc", function()
  local p = T.path("d")
  do
    local s = zr.create_dense(p, "uint8", { 1 }, "raw")
    s:append("x")
    s = nil
  end
  collectgarbage(); collectgarbage()
  local s <close> = zr.open(p) -- would be EBUSY if the first handle were still open
  T.eq(#s, 1)
end)

T.test("sampler", function()
  local sm = zr.sampler { length = 10, batch_size = 5, seed = 7 }
  local a, b = sm:next(), sm:next()
  local seen = {}
  for _, v in ipairs(a) do seen[v] = true end
  for _, v in ipairs(b) do T.ok(not seen[v], "cycle is without replacement"); seen[v] = true end
  for i = 0, 9 do T.ok(seen[i], "index " .. i .. " drawn") end
  T.eq(table.concat(sm:indices(1), ","), table.concat(b, ","), "pure function of step")
  local iid = zr.sampler { length = 3, batch_size = 8, mode = "iid", seed = -1 }
  for _, v in ipairs(iid:indices(5)) do T.ok(v >= 0 and v < 3 and math.type(v) == "integer", "iid range") end
  T.raises("^EINVAL: zsm_validate: cyclic mode needs length >= batch_size %* world_size, got length 3 < 4",
           zr.sampler, { length = 3, batch_size = 4 })
  T.raises("^EINVAL: zsm_validate: rank 2 is not below world_size 2", zr.sampler,
           { length = 8, batch_size = 1, rank = 2, world_size = 2 })
  T.raises("^EINVAL: field 'mode'", zr.sampler, { length = 3, batch_size = 1, mode = "random" })
end)

T.test("delete, compact, read-only open", function()
  local p = T.path("d")
  do
    local s <close> = zr.create_dense(p, "uint8", { 2 }, "zstd")
    s:append("aabbccdd")
    if not zr.raw.zrs_delete then return end
    s:delete({ 0 }) -- swap-last: dd moves to 0
    T.eq(#s, 3); T.eq(s:get(0), "dd")
    s:compact()
    T.eq(s:gather({ 0, 1, 2 }), "ddbbcc")
    T.eq(s:readonly(), false)
    T.raises("^ERANGE", s.delete, s, { 5 })
  end
  if not zr.raw.zrs_open_ex then return end
  local a <close> = zr.open(p, { readonly = true })
  local b <close> = zr.open(p, { readonly = true }) -- many readers
  T.eq(a:readonly(), true); T.eq(#b, 3)
  local w <close> = zr.open(p) -- and one writer beside them (as LMDB)
  T.raises("^EBUSY", zr.open, p) -- but only one
  T.raises("^EUNSUPPORTED", a.append, a, "ee")
  w:append("eeff")
  T.eq(#a, 3) -- a reader's length changes only on refresh
  T.eq(a:refresh(), 5); T.eq(#a, 5); T.eq(a:gather({ 3, 4 }), "eeff")
  T.eq(w:refresh(), 5)
  T.raises("^EBUSY: .*read%-only handles", w.compact, w)
end)

T.test("open with recovery after lost unsynced appends", function()
  local p = T.path("r")
  do
    local s <close> = zr.create_dense(p, "uint8", { 2 }, "raw")
    s:append(string.rep("ab", 10)); s:sync(); s:append(string.rep("cd", 5))
  end
  -- a power loss kept the header (15 records) but only 12 table entries
  local f = assert(io.open(p .. "/0.loc", "rb")); local keep = f:read(12 * 16); f:close()
  f = assert(io.open(p .. "/0.loc", "wb")); f:write(keep); f:close()
  T.raises("recovery", zr.open, p)
  T.raises("^EINVAL", zr.open, p, { readonly = true, recover = true })
  do
    local s <close> = zr.open(p, { recover = true })
    T.eq(#s, 12); T.eq(s:gather({ 9, 10, 11 }), "abcdcd")
    s:append("ef")
  end
  local s <close> = zr.open(p, { readonly = true })
  T.eq(#s, 13); T.eq(s:get(12), "ef")
end)

T.test("dictionary codec", function()
  if not zr.train_dict then return end
  local samples = {}
  for i = 1, 400 do
    samples[i] = string.format("record %05d: the quick brown fox jumps over the lazy dog %d", i, i % 13)
      .. string.rep(string.char(65 + i % 7), 60)
  end
  local cap = select(1, zr.raw.zrs_dict_tier_sizes(zr.raw.ZRS_DICT_FAST))
  T.eq(cap, 32768)
  T.eq(zr.DICT_TIERS.fast.dict_bytes, cap)
  local dict = zr.train_dict(samples, "fast")
  T.ok(#dict > 8 and #dict <= cap, "dictionary size")
  local balanced = zr.train_dict(samples)  -- the default tier
  T.ok(#balanced > 8 and #balanced <= zr.DICT_TIERS.balanced.dict_bytes, "default tier")
  T.raises("^EINVAL: train_dict: unknown dictionary tier", zr.train_dict, samples, cap)
  T.raises("^EINVAL: train_dict: unknown dictionary tier \"huge\"", zr.train_dict, samples, "huge")
  local s <close> = zr.create_ragged(T.path("r"), "uint8", { codec = "zstd_dict", dict = dict })
  T.eq(s.codec, "zstd_dict")
  s:append({ shape = { #samples[1] }, data = samples[1] })
  T.eq(s:get(0).data, samples[1])
  T.raises("^EINVAL", zr.create_ragged, T.path("r"), "uint8", { codec = "zstd_dict" })
  T.raises("^EINVAL", zr.train_dict, { "a" }, "fast")
end)

T.run()
