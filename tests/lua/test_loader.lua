-- The loader from Lua: aligned streams, named streams, close cascade.
local T = require "testlib"
local zr = require "zrecord"

local function stores()
  local d = zr.create_dense(T.path("d"), "uint8", { 3 }, "raw")
  local r = zr.create_ragged(T.path("r"), "uint8", "zstd")
  for i = 0, 7 do
    d:append(string.rep(string.char(i), 3))
    r:append({ shape = { i + 1 }, data = string.rep(string.char(i), i + 1) })
  end
  return d, r
end

T.test("batches are aligned and in step order", function()
  local d, r = stores()
  local _d <close> = d
  local _r <close> = r
  local l <close> = zr.loader({ d, r }, { batch_size = 4, seed = 3, num_workers = 2 })
  for step = 0, 4 do
    T.eq(l:step(), step, "next step")
    local b = l:next()
    T.eq(b.step, step); T.eq(#b.indices, 4); T.eq(#b[1], 12); T.eq(#b[2], 4)
    for k, i in ipairs(b.indices) do
      T.eq(b[1]:byte(3 * k - 2), i, "dense record of index " .. i)
      T.eq(b[2][k].shape[1], i + 1, "ragged shape of index " .. i)
      T.eq(b[2][k].data, string.rep(string.char(i), i + 1))
    end
  end
end)

T.test("same seed, same batches, any worker count", function()
  local d, r = stores()
  local _d <close> = d
  local _r <close> = r
  local a = zr.loader({ d }, { batch_size = 3, seed = 9, num_workers = 1, mode = "iid" })
  local b = zr.loader({ d }, { batch_size = 3, seed = 9, num_workers = 2, mode = 1 })
  for _ = 1, 4 do T.eq(a:next()[1], b:next()[1]) end
  a:close(); b:close()
  local c <close> = zr.loader({ d }, { batch_size = 3, seed = 9, mode = "iid", start_step = 3 })
  T.eq(c:next().step, 3, "start_step")
end)

T.test("named streams", function()
  local d, r = stores()
  local _d <close> = d
  local _r <close> = r
  local l <close> = zr.loader({ image = d, label = r }, { batch_size = 2 })
  local b = l:next()
  T.eq(#b.image, 6); T.eq(#b.label, 2); T.eq(b[1], nil)
  for b2 in l:batches() do T.eq(b2.step, 1); break end
end)

T.test("closing a store closes its loaders first", function()
  local d, r = stores()
  local l = zr.loader({ d, r }, { batch_size = 2 })
  l:next()
  d:close()
  T.raises("^ECLOSED", l.next, l)
  T.raises("^ECLOSED", zr.loader, { d }, { batch_size = 2 })
  r:close()
  l:close() -- idempotent
end)

T.test("loader errors", function()
  local d, r = stores()
  local _d <close> = d
  local _r <close> = r
  local e <close> = zr.create_dense(T.path("e"), "uint8", { 3 }, "raw")
  e:append("abc")
  T.raises("^EINVAL: .*index%-aligned", zr.loader, { d, e }, {})
  T.raises("^EINVAL: field 'batch_size' must be an integer, got the float 2.5", zr.loader, { d }, { batch_size = 2.5 })
  T.raises("^EINVAL", zr.loader, { d }, { batch_size = 100 }) -- cyclic needs batch <= length
  T.raises("^EINVAL: loader: stream 0 is not a zrecord store", zr.loader, { "x" }, {})
  T.raises("^EINVAL: loader: stream 1 is not a zrecord store", zr.loader, { d, 42 }, {})
end)

T.test("unknown loader options are refused", function()
  local d, r = stores()
  local _d <close> = d
  local _r <close> = r
  local valid = "%(valid options: batch_size, mode, seed, start_step, rank, world_size, num_workers, prefetch"
  T.raises("^EINVAL: loader: unknown option 'num_threads' " .. valid, zr.loader, { d }, { num_threads = 4 })
  T.raises("^EINVAL: loader: unknown options 'bogus', 'num_threads' " .. valid,
           zr.loader, { d }, { batch_size = 2, num_threads = 4, bogus = 1 })
  T.raises("^EINVAL: loader: option names must be strings", zr.loader, { d }, { 2 })
  T.raises("^EINVAL: loader: unknown option 'bogus'", zr.raw.zld_create, { d._h }, { bogus = 1 })
  -- every option of state() is accepted back
  local l <close> = zr.loader({ d, r }, { batch_size = 2, readahead = 1 })
  l:next()
  local l2 <close> = zr.loader({ d, r }, l:state())
  T.eq(l2:step(), 1)
end)

T.test("the loader's limits are the C library's, named with the option", function()
  local d, r = stores()
  local _d <close> = d
  local _r <close> = r
  T.raises("^EINVAL: zld_create: num_workers must be <= 4096", zr.loader, { d }, { batch_size = 2, num_workers = 4097 })
  T.raises("^EINVAL: zld_create: prefetch must be <= 65536 batches, got 65537", zr.loader, { d },
           { batch_size = 2, num_workers = 1, prefetch = 65537 })
  T.raises("^EINVAL: zld_create: readahead must be <= 65536 steps", zr.loader, { d }, { batch_size = 2, readahead = 65537 })
  T.raises("^EINVAL: field 'num_workers' must fit in 32 bits", zr.loader, { d }, { batch_size = 2, num_workers = 1 << 40 })
  local l <close> = zr.loader({ d }, { batch_size = 2, num_workers = 1, prefetch = 65536, readahead = 65536 })
  l:next()
end)

T.test("errors name a stream by its key", function()
  local d, r = stores()
  local _d <close> = d
  local e <close> = zr.create_dense(T.path("e"), "uint8", { 3 }, "raw")
  e:append("abc")
  T.raises("^EINVAL: loader: stream 'label' is not a zrecord store", zr.loader, { image = d, label = "x" }, {})
  T.raises("^EINVAL: .*index%-aligned.*stream 'image'.*stream 'mask'", zr.loader, { image = d, mask = e }, {})
  r:close()
  T.raises("^ECLOSED: loader: stream 'label': ragged store .* is closed", zr.loader, { image = d, label = r }, {})
  T.raises("^ECLOSED: loader: stream 1: ragged store", zr.loader, { d, r }, {})
end)

T.test("closing a store under a live loader: ECLOSED naming it, no crash", function()
  for round = 1, 20 do
    local d, r = stores()
    local l = zr.loader({ image = d, label = r }, { batch_size = 4, num_workers = 2, prefetch = 4 })
    T.ok(not l:closed())
    l:next()
    -- a borrowed store cannot be changed under the loader
    T.raises("^EBUSY: delete: store '.*' is read by 1 borrower", d.delete, d, { 0 })
    T.raises("^EBUSY: compact: .*exclusive", d.compact, d)
    T.eq(d:len(), 8, "nothing deleted")
    if round % 2 == 0 then r:close() else d:close() end
    T.ok(l:closed(), "the loader is closed with its store")
    for _ = 1, 3 do -- every later step too
      T.raises("^ECLOSED: .*stream '" .. (round % 2 == 0 and "label" or "image") .. "': store '[^']*/"
               .. (round % 2 == 0 and "r" or "d") .. "%-%d+' was closed while", l.next, l)
    end
    l:close()
    d:close(); r:close()
    collectgarbage()
  end
  -- and with the loader collected before the store (any order is safe)
  local d = stores()
  local l = zr.loader({ d }, { batch_size = 2, num_workers = 2 })
  l:next()
  l = nil -- luacheck: ignore
  collectgarbage()
  d:delete({ 0 })
  T.eq(d:len(), 7)
  d:close()
end)

T.run()
