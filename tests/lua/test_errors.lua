-- Errors are Lua errors "<CODE>: <detail>" with the library's message,
-- never a crash; integers are refused as floats; use after close.
local T = require "testlib"
local zr = require "zrecord"

T.test("create / open errors", function()
  local p = T.path("d")
  local s <close> = zr.create_dense(p, "uint8", { 4 }, "raw")
  T.raises("^EEXIST: .*" .. p:gsub("%p", "%%%0"), zr.create_dense, p, "uint8", { 4 }, "raw")
  T.raises("^EBUSY", zr.open, p)
  T.raises("^ENOTSTORE", zr.open, T.path("missing"))
  T.raises("^EINVAL: .*float128", zr.create_dense, T.path("x"), "float128", { 1 }, "raw")
  T.raises("^EINVAL: .*lz4", zr.create_dense, T.path("x"), "uint8", { 1 }, "lz4")
  T.raises("^EINVAL: item_shape must be a table", zr.create_dense, T.path("x"), "uint8", 4, "raw")
  T.raises("^EINVAL: .*item_shape entry must be an integer, got the float 2.0", zr.create_dense, T.path("x"), "uint8", { 2.0 }, "raw")
  T.raises("^EINVAL: .*must be >= 0", zr.create_dense, T.path("x"), "uint8", { -1 }, "raw")
  T.raises("^EINVAL: path must be a string", zr.open, 42)
  T.raises("^ENOTSTORE", zr.open_ragged, T.path("missing2"))
  local p2 = T.path("d2")
  zr.create_dense(p2, "uint8", { 1 }, "raw"):close()
  T.raises("^EINVAL: .* is a dense store, not a ragged store", zr.open_ragged, p2)
end)

T.test("append and gather errors", function()
  local s <close> = zr.create_dense(T.path("d"), "uint8", { 4 }, "raw")
  s:append("abcdefgh")
  T.raises("^EINVAL: append: 5 bytes is not a multiple of the record size 4", s.append, s, "abcde")
  T.raises("^EINVAL: append: dense records must be a string", s.append, s, 12)
  T.raises("^ERANGE: .*9", s.gather, s, { 0, 9 })
  T.raises("^ERANGE", s.gather, s, { -3 })
  T.raises("^EINVAL: .*index entry 1 must be an integer, got a float", s.gather, s, { 0, 1.0 })
  T.raises("^EINVAL: .*must be an integer, got string", s.gather, s, { "1" })
  T.raises("^EINVAL: .*must be a table of integers", s.gather, s, 1)
  T.raises("^EINVAL: gather: dst holds 4 bytes", s.gather_into, s, zr.buffer(4), { 0, 1 })
  T.raises("^EINVAL: .*must be a zrecord buffer", s.gather_into, s, "xxxxxxxx", { 0, 1 })
  T.eq(#s, 2, "failed appends commit nothing")
  local r <close> = zr.create_ragged(T.path("r"), "<i4", "raw")
  T.raises("^EINVAL: append_ragged: record 0 of shape with 3 elements needs 12 bytes of data, got 8",
           r.append, r, { { shape = { 3 }, data = "12345678" } })
  T.raises("^EINVAL: append_ragged: record 1 needs shape", r.append, r, { { shape = { 1 }, data = "1234" }, { data = "x" } })
  T.raises("^EINVAL: append_ragged: record 1 of shape with 0 elements needs 0 bytes of data, got 4",
           r.append, r, { { shape = { 1 }, data = "1234" }, { shape = { 0, 2 }, data = "1234" } })
  T.raises("^EINVAL: append_ragged: record 0: ragged_encode: a record of 1 dims whose size overflows 64 bits",
           r.append, r, { { shape = { 1 << 62 }, data = "" } })
  T.raises("^EINVAL", r.gather_into, r, zr.buffer(4), { 0 })
  T.eq(#r, 0)
end)

T.test("64-bit integers stay integers; floats refused", function()
  local s <close> = zr.create_dense(T.path("d"), "uint8", { 1 }, "raw")
  local h = s._h
  T.eq(math.type(zr.raw.zrs_length(h)), "integer")
  T.eq(math.type(zr.raw.zrs_record_size(h)), "integer")
  T.eq(math.type(zr.raw.zrs_get_dtype(h)), "integer", "enums are integers too")
  T.eq(zr.raw.zrs_dtype_str(2), "<i2")
  T.raises("^EINVAL: zrs_dtype_str: argument 1 %(dtype%) must be an integer, got the float 2.0", zr.raw.zrs_dtype_str, 2.0)
  T.raises("^EINVAL: zrs_dtype_itemsize: .*must be an integer, got string", zr.raw.zrs_dtype_itemsize, "2")
  T.raises("^EINVAL: .*must be >= 0", zr.raw.zrs_dtype_itemsize, -1)
  T.raises("^EINVAL: .*must be an integer, got the float", zr.raw.sampler_indices, { length = 4, batch_size = 2 }, 1.5)
  T.raises("^EINVAL: field 'length' must be an integer, got the float 4.0",
           zr.raw.sampler_indices, { length = 4.0, batch_size = 2 }, 0)
  -- a uint64 above 2^63 - 1 comes back as its two's-complement integer
  local big = zr.sampler { length = 10, batch_size = 1, seed = math.mininteger }
  T.eq(#big:indices(0), 1)
end)

T.test("use after close", function()
  local s = zr.create_dense(T.path("d"), "uint8", { 1 }, "raw")
  s:append("a")
  s:close()
  s:close() -- idempotent
  T.ok(s:closed())
  T.raises("^ECLOSED: dense store .* is closed", s.gather, s, { 0 })
  T.raises("^ECLOSED", s.append, s, "b")
  T.raises("^ECLOSED", s.len, s)
  T.raises("^ECLOSED", function() return #s end)
  T.ok(tostring(s):find("closed"), "tostring of a closed store")
  local l_ok = pcall(zr.loader, { s }, {})
  T.ok(not l_ok, "loader over a closed store")
end)

T.test("raw handles of the wrong type are refused", function()
  local s <close> = zr.create_dense(T.path("d"), "uint8", { 1 }, "raw")
  T.raises("expected 'zrs_store", zr.raw.zrs_length, zr.raw.zrs_engine(s._h))
  T.raises("^EINVAL: gather_dense: store must be an open handle", zr.raw.gather_dense, {}, { 0 })
end)

-- Every number in a message is 0-based, like the API's record indices:
-- a record index in a store, or an entry's position in a table argument.
T.test("record and entry numbers in messages are 0-based", function()
  local s <close> = zr.create_dense(T.path("d"), "uint8", { 1 }, "raw")
  s:append("abc")
  -- the C library's index (0-based) and the entry's position agree
  T.raises("^ERANGE: .*index 3 ", s.gather, s, { 3 })
  T.raises("entry 0 must be an integer", s.gather, s, { 0.5 })
  T.raises("entry 2 must be an integer", s.gather, s, { 0, 1, "x" })
  local r <close> = zr.create_ragged(T.path("r"), "uint8", "raw")
  T.raises("record 0 must be a table", r.append, r, { "x" })
  T.raises("record 2 needs shape", r.append, r, { { shape = { 1 }, data = "a" }, { shape = {}, data = "b" }, { data = "c" } })
  T.raises("shape entry must be >= 0, got %-1 %(record 1%)", r.append, r, { { shape = {}, data = "a" }, { shape = { -1 }, data = "" } })
  T.raises("record 1 of shape with 2 elements", r.append, r, { { shape = {}, data = "a" }, { shape = { 2 }, data = "c" } })
  T.raises("sample 1 must be a string", zr.train_dict, { "a", 2 }, "fast")
  T.eq(#r, 0, "failed appends commit nothing")
end)

-- An empty append is a no-op returning #store, for both kinds.
T.test("empty appends", function()
  local s <close> = zr.create_dense(T.path("d"), "uint8", { 2 }, "raw")
  local r <close> = zr.create_ragged(T.path("r"), "uint8", "raw")
  T.eq(s:append(""), 0)
  T.eq(r:append({}), 0)
  s:append("ab"); r:append({ shape = { 1 }, data = "a" })
  T.eq(s:append(""), 1)
  T.eq(s:append(zr.buffer(0)), 1)
  T.eq(r:append({}), 1)
  T.eq(#s, 1); T.eq(#r, 1)
end)

T.test("sampler errors name the parameter and its value (the C library's detail)", function()
  T.raises("^EINVAL: zsm_validate: cyclic mode needs length >= batch_size %* world_size, got length 3 < 4",
           zr.sampler, { length = 3, batch_size = 4 })
  T.raises("^EINVAL: zsm_validate: length is 0", zr.sampler, { length = 0, batch_size = 1, mode = "sequential" })
  T.raises("^EINVAL: zsm_validate: length is 0", zr.raw.sampler_indices, { length = 0, batch_size = 1, mode = 1 }, 0)
  T.raises("^EINVAL: sampler: unknown option 'size' %(valid options: length, batch_size, mode, seed, rank, world_size%)",
           zr.sampler, { length = 3, size = 1 })
end)

T.test("paths with an embedded NUL are refused, not cut short", function()
  local base = T.path("nul")
  T.raises("^EINVAL: .*embedded NUL", zr.create_dense, base .. "\0evil", "uint8", { 1 }, "raw")
  T.raises("^EINVAL: .*embedded NUL", zr.create_ragged, base .. "\0evil", "uint8", "raw")
  zr.create_dense(base, "uint8", { 1 }, "raw"):close()
  T.raises("^EINVAL: .*embedded NUL", zr.open, base .. "\0/x")
  T.raises("^EINVAL: .*embedded NUL", zr.open, base .. "\0/x", { readonly = true })
end)

T.test("codes and names are the C table's", function()
  local raw = zr.raw
  local n = 0
  for s = 0, raw.ZR_STATUS_LAST, -1 do
    local name = raw.zr_status_name(s)
    T.ok(type(name) == "string", "zr_status_name(" .. s .. ")")
    T.eq(raw["ZR_" .. name], s, "ZR_" .. name)
    T.ok(#raw.zr_strerror(s) > 0 and raw.zr_strerror(s) ~= "unknown error", "zr_strerror(" .. s .. ")")
    n = n + 1
  end
  T.eq(n, raw.ZR_STATUS_COUNT, "statuses in the table")
  T.eq(raw.zr_status_name(raw.ZR_STATUS_LAST - 1), nil, "a code past the table")
  -- every ZR_ constant the module exports is in the table
  for k, v in pairs(raw) do
    if k:match("^ZR_E") or k == "ZR_OK" then
      T.eq(raw.zr_status_name(v), k:sub(4), k)
    end
  end
  -- an error's code prefix is the C name, its detail the library's
  T.raises("^" .. raw.zr_status_name(raw.ZR_ENOTSTORE) .. ": ", zr.open, T.path("missing"))
end)

T.run()
