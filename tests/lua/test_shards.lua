-- Many stores as one dataset from Lua: concatenated shards, loaders over
-- them, weighted mixtures (the Python suite's test_shards.py cases).
local T = require "testlib"
local zr = require "zrecord"

local LENS = { 30, 1, 0, 57, 12 } -- one empty shard on purpose

-- Record i of the whole dataset: 12 float32 (a (3, 4) array) encoding i.
local function image(i)
  local v = {}
  for k = 0, 11 do v[#v + 1] = string.pack("<f", k + 100.0 * i) end
  return table.concat(v)
end

local function tokens(i)
  local v = {}
  for k = 0, i % 5 do v[#v + 1] = string.pack("<i4", k + 10 * i) end
  return { shape = { i % 5 + 1 }, data = table.concat(v) }
end

-- The same dataset as #lens shards (x paths, y paths) and as one store
-- (all-x, all-y); record i of the whole is image(base + i), tokens(base + i).
local function write_dataset(lens, base)
  base = base or 0
  local xs, ys, start = {}, {}, 0
  for k, n in ipairs(lens) do
    local x = zr.create_dense(T.path("x"), "<f4", { 3, 4 }, k % 2 == 0 and "raw" or "zstd")
    local y = zr.create_ragged(T.path("y"), "<i4")
    local recs, rag = {}, {}
    for i = start, start + n - 1 do recs[#recs + 1] = image(base + i); rag[#rag + 1] = tokens(base + i) end
    x:append(table.concat(recs))
    if n > 0 then y:append(rag) end
    xs[k], ys[k] = x.path, y.path
    x:close(); y:close()
    start = start + n
  end
  local ax = zr.create_dense(T.path("all-x"), "<f4", { 3, 4 })
  local ay = zr.create_ragged(T.path("all-y"), "<i4")
  local recs, rag = {}, {}
  for i = 0, start - 1 do recs[#recs + 1] = image(base + i); rag[#rag + 1] = tokens(base + i) end
  ax:append(table.concat(recs)); ay:append(rag)
  local all = { x = ax.path, y = ay.path }
  ax:close(); ay:close()
  return xs, ys, all, start
end

T.test("concat reads like one store", function()
  local xs, ys, _, n = write_dataset(LENS)
  local x <close> = zr.concat(xs)
  local y <close> = zr.concat(ys)
  T.eq(#x, n); T.eq(y:len(), 100); T.eq(n, 100)
  T.eq(x.dtype, "<f4"); T.eq(x.kind, "dense"); T.eq(#x.item_shape, 2)
  T.eq(x.item_shape[1], 3); T.eq(x.item_shape[2], 4); T.eq(x.record_size, 48)
  T.ok(y.ragged and y.item_shape == nil, "y is ragged without an item_shape")
  T.eq(table.concat(x:offsets(), ","), "0,30,31,31,88,100")
  T.eq(x.nshards, 5); T.eq(x:paths()[4], xs[4])
  for i = 0, n - 1 do
    T.eq(x:get(i), image(i), "record " .. i)
    local r = y:get(i)
    T.eq(r.data, tokens(i).data, "ragged record " .. i); T.eq(r.shape[1], i % 5 + 1)
  end
  T.eq(x:get(-1), image(n - 1))
  T.eq(x:gather({ 5, 99, 30, 31 }), image(5) .. image(99) .. image(30) .. image(31))
  local rs = y:gather({ 0, 31, 99 })
  T.eq(#rs, 3); T.eq(string.unpack("<i4", rs[2].data), 310); T.eq(string.unpack("<i4", rs[3].data), 990)
  T.raises("^ERANGE", x.get, x, n)
  T.raises("^ERANGE", x.get, x, -n - 1)
  T.raises("^ERANGE", y.gather, y, { n })
end)

T.test("a concatenation of open stores is borrowed", function()
  local xs = write_dataset({ 4, 5 })
  local a = zr.open(xs[1], { readonly = true })
  local b = zr.open(xs[2], { readonly = true })
  local c = zr.concat({ a, b })
  local l = zr.loader({ x = c }, { batch_size = 3 })
  l:next()
  c:close()
  T.raises("^ECLOSED", l.next, l)
  T.ok(not a:closed() and not b:closed(), "borrowed stores stay open")
  c = zr.concat({ a, b })
  l = zr.loader({ x = c }, { batch_size = 3 })
  b:close() -- a borrowed shard going away closes the concatenation and its loader
  T.ok(c:closed(), "the concatenation closed with its shard")
  T.raises("^ECLOSED", l.next, l)
  T.raises("^ECLOSED", c.get, c, 0)
  T.ok(not a:closed(), "the other shard stays open")
  T.raises("^EINVAL.*all paths or all stores", zr.concat, { a, xs[2] })
  a:close()
end)

T.test("an identity mismatch names both shards", function()
  local s0, s1 = T.path("s-0"), T.path("s-1")
  local t1, u1 = T.path("t-1"), T.path("u-1")
  zr.create_dense(s0, "<f4", { 3, 4 }):close()
  zr.create_dense(s1, "<f4", { 3, 5 }):close()
  zr.create_dense(t1, "<i4", { 3, 4 }):close()
  zr.create_ragged(u1, "<f4"):close()
  local e = T.raises("^EINVAL.*item_shape", zr.concat, { s0, s1 })
  T.ok(e:find(s0, 1, true) and e:find(s1, 1, true) and e:find("(3, 5)", 1, true), e)
  T.raises("^EINVAL.*dtype.*<i4", zr.concat, { s0, t1 })
  T.raises("^EINVAL.*kind", zr.concat, { s0, u1 })
  T.raises("^EINVAL.*non%-empty", zr.concat, {})
  T.raises("ENOTSTORE", zr.concat, { s0, T.path("nothing") })
  -- nothing was left open: a writer can take every shard
  zr.open(s0):close()
  zr.open(s1):close()
end)

T.test("a loader over shards equals a loader over one store", function()
  local xs, ys, all = write_dataset(LENS)
  local x <close> = zr.concat(xs)
  local y <close> = zr.concat(ys)
  local ax <close> = zr.open(all.x, { readonly = true })
  local ay <close> = zr.open(all.y, { readonly = true })
  for _, mode in ipairs({ "cyclic", "iid", "sequential" }) do
    local one = zr.loader({ x = ax, y = ay }, { batch_size = 16, mode = mode, seed = 4, num_workers = 1 })
    local many = zr.loader({ x = x, y = y }, { batch_size = 16, mode = mode, seed = 4, num_workers = 3 })
    for _ = 1, 20 do
      local a, b = one:next(), many:next()
      T.eq(a.x, b.x, mode .. " dense stream")
      T.eq(#a.y, #b.y)
      for k = 1, #a.y do T.eq(a.y[k].data, b.y[k].data, mode .. " ragged record") end
      T.eq(table.concat(a.indices, ","), table.concat(b.indices, ","))
    end
    local state = many:state()
    many:close()
    local resumed = zr.loader({ x = x, y = y }, state)
    T.eq(resumed:next().x, one:next().x, mode .. " resumed")
    resumed:close(); one:close()
  end
  -- a concatenation and a plain store side by side (same total length)
  local l <close> = zr.loader({ x = x, y = ay }, { batch_size = 8, seed = 1 })
  local b = l:next()
  for k, i in ipairs(b.indices) do
    T.eq(b.x:sub(48 * k - 47, 48 * k), image(i)); T.eq(b.y[k].data, tokens(i).data)
  end
  -- flips reach a concatenation's records as a store's
  local f <close> = zr.loader({ x }, { batch_size = 4, seed = 2, flip = { [0] = 1.0 } })
  local fb = f:next()
  local rec = fb[1]:sub(1, 48)
  local want = {}
  for row = 0, 2 do
    for col = 3, 0, -1 do want[#want + 1] = image(fb.indices[1]):sub(16 * row + 4 * col + 1, 16 * row + 4 * col + 4) end
  end
  T.eq(rec, table.concat(want), "a flipped record of a concatenation")
end)

T.test("concatenated streams must be sharded alike", function()
  local xs = write_dataset({ 10, 20 })
  local zs = {}
  for k, n in ipairs({ 20, 10 }) do
    local s = zr.create_dense(T.path("z"), "<f4", { 3, 4 })
    s:append(string.rep("\0", 48 * n))
    zs[k] = s.path
    s:close()
  end
  local x <close> = zr.concat(xs)
  local z <close> = zr.concat(zs)
  T.eq(#x, 30); T.eq(#z, 30)
  T.raises("^EINVAL.*shard 0", zr.loader, { x = x, z = z }, { batch_size = 4 })
end)

-- Two sources of streams x and y: "big" (300 records in 3 shards of
-- images 0..299) and "small" (40 records, images 10000..10039).
local function mixture_sources()
  local bx, by = write_dataset({ 100, 120, 80 })
  local sx, sy = write_dataset({ 40 }, 10000)
  return { x = bx, y = by }, { x = sx[1], y = sy[1] }
end

T.test("mixture records and shares", function()
  local big, small = mixture_sources()
  local w = { big = 0.7, small = 0.3 }
  local m <close> = zr.mixture({ big = big, small = small }, w, { small = "iid" })
  T.eq(m:lengths().big, 300); T.eq(m:lengths().small, 40)
  T.eq(m.shares.big, 0.7)
  local l <close> = zr.loader(m, { batch_size = 32, seed = 11, num_workers = 2 })
  local counts, nbatches = { big = 0, small = 0 }, 300
  for _ = 1, nbatches do
    local b = l:next()
    local src, idx = m:locate(l, b.indices)
    local seen = {}
    for k = 1, 32 do
      local g = idx[k] + (src[k] == "small" and 10000 or 0)
      T.eq(b.x:sub(48 * k - 47, 48 * k), image(g), "record of " .. src[k])
      T.eq(b.y[k].data, tokens(g).data)
      counts[src[k]] = counts[src[k]] + 1
      if src[k] == "big" then
        T.ok(not seen[idx[k]], "the cyclic source never repeats a record within a batch")
        seen[idx[k]] = true
      end
    end
  end
  -- Pearson chi-square, 1 degree of freedom, 9600 draws: P(X > 15.1) = 1e-4
  -- for a correct sampler; the seed is fixed, so the outcome is too.
  local n = nbatches * 32
  local chi, wrong = 0, 0
  for s, p in pairs(w) do chi = chi + (counts[s] - n * p) ^ 2 / (n * p) end
  for s, p in pairs({ big = 0.6, small = 0.4 }) do wrong = wrong + (counts[s] - n * p) ^ 2 / (n * p) end
  T.ok(chi < 15.1, "chi-square " .. chi)
  T.ok(wrong > 15.1, "a wrong weight is told apart: " .. wrong)
end)

T.test("a mixture is pure in seed, step and rank", function()
  local big, small = mixture_sources()
  local m <close> = zr.mixture({ big, small }, { 1, 1 }, { "cyclic", "iid" })
  local ref = zr.loader(m, { batch_size = 8, seed = 5, num_workers = 1 })
  local batches = {}
  for k = 0, 11 do batches[k] = ref:next().x end
  local state = ref:state()
  local following = ref:next().x
  ref:close()
  T.eq(state.start_step, 12); T.eq(state.seed, 5); T.eq(state.mode, "cyclic")
  state.num_workers = 3
  local res = zr.loader(m, state)
  T.eq(res:next().x, following, "resumed from state")
  res:close()
  local many = zr.loader(m, { batch_size = 8, seed = 5, num_workers = 4, prefetch = 7, start_step = 3 })
  for k = 3, 11 do T.eq(many:next().x, batches[k], "step " .. k) end
  many:close()
  local r0 = zr.loader(m, { batch_size = 4, seed = 5, rank = 0, world_size = 2 })
  local r1 = zr.loader(m, { batch_size = 4, seed = 5, rank = 1, world_size = 2 })
  for k = 0, 11 do T.eq(r0:next().x .. r1:next().x, batches[k], "ranks of step " .. k) end
  r0:close(); r1:close()
  local other <close> = zr.loader(m, { batch_size = 8, seed = 6 })
  T.ok(other:next().x ~= batches[0], "another seed is another run")
  -- sources without a mode of their own take the loader's, on resume too
  local d <close> = zr.mixture({ big, small }, { 1, 1 })
  local a = zr.loader(d, { batch_size = 8, seed = 5, mode = "iid" })
  for _ = 1, 3 do a:next() end
  local st = a:state()
  T.eq(st.mode, "iid")
  local want = a:next().x
  a:close()
  local r <close> = zr.loader(d, st)
  T.eq(r:next().x, want, "a mixture of the loader's mode resumed from state")
end)

T.test("mixture errors", function()
  local big, small = mixture_sources()
  T.raises("^EINVAL.*same stream names", zr.mixture, { a = big, b = { x = small.x } }, { a = 1, b = 1 })
  T.raises("^EINVAL.*finite number > 0", zr.mixture, { a = big, b = small }, { a = 1, b = 0 })
  T.raises("^EINVAL.*finite number > 0", zr.mixture, { a = big, b = small }, { a = 1 })
  local m = zr.mixture({ a = big, b = small }, { a = 1, b = 1 }) -- small is cyclic by default
  T.raises("^EINVAL.*iid", zr.loader, m, { batch_size = 64 })
  m:close()
  local wrong = { x = small.y, y = small.x } -- kinds swapped against the first source
  m = zr.mixture({ a = big, b = wrong }, { a = 1, b = 1 }, "iid")
  T.raises("^EINVAL.*identity in every source", zr.loader, m, { batch_size = 4 })
  T.raises("^EINVAL.*unknown.*mode", zr.loader, zr.mixture({ big }, { 1 }, "often"), { batch_size = 4 })
  m:close()
end)

T.test("closing a source closes the mixture loader", function()
  local big, small = mixture_sources()
  local cx, cy = zr.concat(big.x), zr.concat(big.y)
  local m = zr.mixture({ a = { x = cx, y = cy }, b = small }, { a = 2, b = 1 }, "iid")
  local l = zr.loader(m, { batch_size = 4 })
  l:next()
  cx:close()
  T.raises("^ECLOSED", l.next, l)
  m:close()
  cy:close()
end)

T.run()
