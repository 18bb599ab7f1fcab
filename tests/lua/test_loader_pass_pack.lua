-- Finite evaluation passes, length bucketing, sequence packing and pad()
-- from Lua (the same behaviour as Python's PassLoader, mode='bucket',
-- mode='pack' and pad()).
local T = require "testlib"
local zr = require "zrecord"

local function i32(s, k) return (string.unpack("<i4", s, 4 * k + 1)) end

-- ------------------------------------------------------------- passes

local N = 23
local function labels()
  local s = zr.create_dense(T.path("label"), "int64", {}, "raw")
  local b = {}
  for i = 0, N - 1 do b[#b + 1] = string.pack("<i8", i * 10) end
  s:append(table.concat(b))
  return s
end

local function drain(l)
  local seen, steps, sizes = {}, 0, {}
  for b in l:batches() do
    steps = steps + 1
    sizes[#sizes + 1] = #b.indices
    for k, i in ipairs(b.indices) do
      T.eq(string.unpack("<i8", b.label or b[1], 8 * (k - 1) + 1), i * 10, "record " .. i)
      seen[#seen + 1] = i
    end
  end
  T.ok(l:next() == nil, "next() after the end is nil again")
  return seen, steps, sizes
end

T.test("pass: index order, each record once, last batch partial", function()
  local s <close> = labels()
  local l <close> = zr.pass_loader({ label = s }, { batch_size = 5, num_workers = 2 })
  T.eq(l:steps(), 5, "steps")
  local seen, steps, sizes = drain(l)
  T.eq(steps, 5, "batches")
  T.eq(#seen, N, "records")
  for k, i in ipairs(seen) do T.eq(i, k - 1, "position " .. k) end
  T.eq(sizes[5], 3, "last batch")
end)

T.test("pass: drop_last, shuffle by seed and epoch, endless steps() is nil", function()
  local s <close> = labels()
  local d <close> = zr.pass_loader({ label = s }, { batch_size = 5, drop_last = true })
  T.eq(d:steps(), 4, "drop_last steps")
  local _, steps = drain(d)
  T.eq(steps, 4, "drop_last batches")
  local function order(seed, epoch)
    local l <close> = zr.pass_loader({ label = s }, { batch_size = 4, shuffle = true, seed = seed, epoch = epoch })
    local seen = drain(l)
    local sorted = { table.unpack(seen) }
    table.sort(sorted)
    for k, i in ipairs(sorted) do T.eq(i, k - 1, "a permutation") end
    return table.concat(seen, ",")
  end
  T.eq(order(3, 0), order(3, 0), "same seed and epoch")
  T.ok(order(3, 0) ~= order(3, 1), "another epoch, another order")
  T.ok(order(3, 0) ~= order(4, 0), "another seed, another order")
  local e <close> = zr.loader({ s }, { batch_size = 4 })
  T.eq(e:steps(), nil, "endless")
end)

T.test("pass: 3 ranks take each record exactly once; even_batches pads", function()
  local s <close> = labels()
  for _, drop in ipairs({ false, true }) do
    local count = {}
    for r = 0, 2 do
      local l <close> = zr.pass_loader({ label = s }, { batch_size = 2, rank = r, world_size = 3, drop_last = drop, shuffle = true })
      local seen = drain(l)
      for _, i in ipairs(seen) do count[i] = (count[i] or 0) + 1 end
    end
    local total = 0
    for _, c in pairs(count) do T.eq(c, 1, "once"); total = total + 1 end
    T.eq(total, drop and 18 or N, "records over the ranks")
  end
  -- 23 records, global batch 12: the last global batch's 11 go 3, 4, 4
  local valid, real = {}, {}
  for r = 0, 2 do
    local l <close> = zr.pass_loader({ label = s }, { batch_size = 4, rank = r, world_size = 3, even_batches = true })
    T.eq(l:steps(), 2, "the same steps on every rank")
    valid[r] = 0
    for b in l:batches() do
      T.eq(#b.indices, 4, "full batches")
      valid[r] = valid[r] + (b.valid or #b.indices)
      for k = 1, b.valid or #b.indices do real[b.indices[k]] = (real[b.indices[k]] or 0) + 1 end
    end
  end
  T.eq(valid[0] .. "," .. valid[1] .. "," .. valid[2], "7,8,8", "real rows per rank")
  for i = 0, N - 1 do T.eq(real[i], 1, "record " .. i .. " once among the real rows") end
end)

T.test("pass: resume mid-pass from state()", function()
  local s <close> = labels()
  local a <close> = zr.pass_loader({ label = s }, { batch_size = 3, shuffle = true, seed = 7, epoch = 2 })
  local all = {}
  for b in a:batches() do all[#all + 1] = table.concat(b.indices, ",") end
  local b <close> = zr.pass_loader({ label = s }, { batch_size = 3, shuffle = true, seed = 7, epoch = 2 })
  b:next(); b:next(); b:next()
  local st = b:state()
  T.eq(st.pass, true, "state.pass")
  T.eq(st.epoch, 2, "state.epoch")
  local c <close> = zr.loader({ label = s }, st)
  local k = 4
  for batch in c:batches() do
    T.eq(table.concat(batch.indices, ","), all[k], "step " .. (k - 1))
    k = k + 1
  end
  T.eq(k, #all + 1, "the rest of the pass")
end)

-- ----------------------------------------------------------- bucketing

T.test("bucket: batches of similar length, each record once per cycle, resumable", function()
  local n = 64
  local s = zr.create_dense(T.path("b"), "int32", {}, "raw")
  local b, lengths = {}, {}
  for i = 0, n - 1 do
    lengths[i + 1] = (i * 37) % 61
    b[#b + 1] = string.pack("<i4", i)
  end
  s:append(table.concat(b))
  local opts = { batch_size = 4, mode = "bucket", lengths = lengths, window = 4, seed = 2 }
  local l <close> = zr.loader({ x = s }, opts)
  local seen, spread, ref = {}, 0, {}
  for step = 0, n // 4 - 1 do
    local bt = l:next()
    T.eq(bt.step, step, "step")
    local lo, hi = math.huge, -1
    for _, i in ipairs(bt.indices) do
      T.ok(not seen[i], "record " .. i .. " twice in a cycle")
      seen[i] = true
      lo, hi = math.min(lo, lengths[i + 1]), math.max(hi, lengths[i + 1])
    end
    spread = spread + (hi - lo)
    ref[step] = table.concat(bt.indices, ",")
  end
  -- windows of 16 records sorted by length: far below a random draw's spread
  T.ok(spread / (n // 4) < 25, "mean spread " .. spread / (n // 4))
  local r <close> = zr.loader({ x = s }, { batch_size = 4, mode = "bucket", lengths = lengths, window = 4, seed = 2, start_step = 5 })
  local st = r:state()
  T.eq(st.mode, "bucket", "state.mode")
  T.eq(#st.lengths, n, "state.lengths")
  T.eq(st.window, 4, "state.window")
  local again <close> = zr.loader({ x = s }, st)
  T.eq(table.concat(again:next().indices, ","), ref[5], "resumed step 5")
  T.raises("EINVAL: loader: mode 'bucket' needs lengths", zr.loader, { x = s }, { batch_size = 4, mode = "bucket" })
  T.raises("EINVAL: loader: lengths applies only to mode 'bucket'", zr.loader, { x = s }, { batch_size = 4, lengths = lengths })
  T.raises("EINVAL", zr.loader, { x = s }, { batch_size = 4, mode = "bucket", lengths = { 1, 2 } })
  s:close()
end)

-- ---------------------------------------------------------------- pad

T.test("pad: to the longest, to a length, pad value, errors", function()
  local recs = {
    { shape = { 2, 2 }, data = string.pack("<i2<i2<i2<i2", 1, 2, 3, 4) },
    { shape = { 0, 2 }, data = "" },
    { shape = { 3, 2 }, data = string.pack("<i2<i2<i2<i2<i2<i2", 5, 6, 7, 8, 9, 10) },
  }
  local out, lens = zr.pad(recs, "int16", nil, -1)
  T.eq(#out, 3 * 3 * 2 * 2, "bytes")
  T.eq(table.concat(lens, ","), "2,0,3", "lengths")
  local vals = {}
  for k = 0, #out // 2 - 1 do vals[#vals + 1] = (string.unpack("<i2", out, 2 * k + 1)) end
  T.eq(table.concat(vals, ","), "1,2,3,4,-1,-1,-1,-1,-1,-1,-1,-1,5,6,7,8,9,10", "values")
  local cut = zr.pad(recs, "int16", 1)
  T.eq(cut, string.pack("<i2<i2<i2<i2<i2<i2", 1, 2, 0, 0, 5, 6), "cut to 1")
  T.raises("EINVAL: pad: record 1 has another trailing shape", zr.pad,
           { recs[1], { shape = { 1, 3 }, data = string.rep("\0", 6) } }, "int16")
  T.raises("EINVAL: pad: pad value 70000 does not fit", zr.pad, recs, "int16", nil, 70000)
  T.raises("EINVAL: pad: records must be", zr.pad, {}, "int16")
  -- a loader's ragged batch, padded
  local r = zr.create_ragged(T.path("pr"), "uint8", "raw")
  for i = 0, 5 do r:append({ shape = { i }, data = string.rep(string.char(i + 1), i) }) end
  local l <close> = zr.loader({ r }, { batch_size = 3, mode = "sequential" })
  local b = l:next()
  local block, n = zr.pad(b[1], "uint8")
  T.eq(block, "\0\0" .. "\2\0" .. "\3\3", "padded batch")
  T.eq(table.concat(n, ","), "0,1,2", "its lengths")
  l:close()
  r:close()
end)

-- ------------------------------------------------------------- packing

local L, ND = 40, 150
local function doc_len(d)
  local r = (d * 2654435761) % 1000
  if d == 7 then return 0 end
  if r % 9 == 0 then return 45 + r % 90 end
  return 1 + r % 30
end
local function token(d, j) return d * 4096 + j end

local function corpus()
  local t = zr.create_ragged(T.path("tokens"), "int32", "zstd")
  local m = zr.create_ragged(T.path("mask"), "uint8", "raw")
  local tr, mr = {}, {}
  for d = 0, ND - 1 do
    local n, tb, mb = doc_len(d), {}, {}
    for j = 0, n - 1 do
      tb[#tb + 1] = string.pack("<i4", token(d, j))
      mb[#mb + 1] = string.char((d + j) % 251)
    end
    tr[#tr + 1] = { shape = { n }, data = table.concat(tb) }
    mr[#mr + 1] = { shape = { n }, data = table.concat(mb) }
  end
  t:append(tr)
  m:append(mr)
  return t, m
end

local function placed(n, overlong)
  if n <= L or overlong == "split" then return n end
  return overlong == "truncate" and L or 0
end

-- The acceptance checks on one packed batch; adds to covered[d] what
-- each document got. Returns the batch's rows.
local function check_pack(b, covered, policy, overlong, with_mask)
  local p = b.pack
  local rows = p.rows
  T.eq(#b.tokens, rows * L * 4, "tokens bytes")
  T.eq(#b.segment_ids, rows * L * 4, "segment_ids bytes")
  T.eq(#b.positions, rows * L * 4, "positions bytes")
  T.eq(#b.seq_lens, rows * p.max_segments * 4, "seq_lens bytes")
  T.eq(#b.cu_seqlens, (p.segments + 1) * 4, "cu_seqlens bytes")
  T.eq(#b.indices, p.segments, "a document per segment")
  T.eq(i32(b.cu_seqlens, 0), 0, "cu_seqlens[0]")
  local seg_no, tokens = 0, 0
  for r = 0, rows - 1 do
    local start = 0
    for k = 0, p.max_segments - 1 do
      local n = i32(b.seq_lens, r * p.max_segments + k)
      if n == 0 then break end
      seg_no = seg_no + 1
      local first = i32(b.tokens, r * L + start)
      local d, off = first // 4096, first % 4096
      T.eq(d, b.indices[seg_no], "segment " .. seg_no .. "'s document")
      for j = 0, n - 1 do
        local e = r * L + start + j
        T.eq(i32(b.segment_ids, e), k + 1, "segment id")
        T.eq(i32(b.positions, e), j, "position")
        T.eq(i32(b.tokens, e), token(d, off + j), "token in order")
        if with_mask then T.eq(b.mask:byte(e + 1), (d + off + j) % 251, "mask aligned") end
      end
      if policy == "concat" then T.eq(off, covered[d] or 0, "concat offset") end
      if policy ~= "concat" and n < L then
        T.eq(off, placed(doc_len(d), overlong) // L * L, "the rest of a split document")
      end
      covered[d] = (covered[d] or 0) + n
      start = start + n
      tokens = tokens + n
      T.eq(i32(b.cu_seqlens, seg_no), tokens, "cu_seqlens")
    end
    for e = start, L - 1 do
      T.eq(i32(b.segment_ids, r * L + e), 0, "padding segment")
      T.eq(i32(b.tokens, r * L + e), 0, "padding token")
    end
  end
  T.eq(seg_no, p.segments, "segments")
  T.eq(tokens, p.tokens, "tokens")
  return rows
end

T.test("pack: one pass places every document exactly once (each policy and overlong rule)", function()
  local t, m = corpus()
  for _, policy in ipairs({ "first_fit", "best_fit", "concat" }) do
    for _, overlong in ipairs({ "split", "truncate", "drop" }) do
      local covered, rows = {}, 0
      local l <close> = zr.pass_loader({ tokens = t, mask = m }, {
        batch_size = 4, shuffle = true, seed = 3, epoch = 1, mode = "pack", pack_length = L,
        pack_policy = policy, pack_window = 32, pack_overlong = overlong, num_workers = 2 })
      local steps = 0
      for b in l:batches() do
        rows = rows + check_pack(b, covered, policy, overlong, true)
        steps = steps + 1
      end
      T.eq(steps, l:steps(), "steps()")
      local total = 0
      for d = 0, ND - 1 do
        T.eq(covered[d] or 0, placed(doc_len(d), overlong), policy .. "/" .. overlong .. " document " .. d)
        total = total + placed(doc_len(d), overlong)
      end
      if policy == "concat" then T.eq(rows, (total + L - 1) // L, "concat rows") end
    end
  end
  t:close(); m:close()
end)

T.test("pack: the same batches for any worker count, after a seek and from state()", function()
  local t, m = corpus()
  local streams = { tokens = t, mask = m }
  local function opts(extra)
    local o = { batch_size = 6, mode = "pack", pack_length = L, pack_policy = "best_fit", pack_window = 24, seed = 9 }
    for k, v in pairs(extra or {}) do o[k] = v end
    return o
  end
  local function key(b)
    return table.concat({ b.tokens, b.mask, b.segment_ids, b.positions, b.seq_lens, b.cu_seqlens,
                          table.concat(b.indices, ",") }, "|")
  end
  local ref = {}
  do
    local a <close> = zr.loader(streams, opts({ num_workers = 1 }))
    for s = 0, 19 do ref[s] = key(a:next()) end
  end
  local b <close> = zr.loader(streams, opts({ num_workers = 3 }))
  for s = 0, 19 do T.eq(key(b:next()), ref[s], "3 workers, step " .. s) end
  local c <close> = zr.loader(streams, opts({ num_workers = 2, start_step = 11 }))
  for s = 11, 14 do T.eq(key(c:next()), ref[s], "seek, step " .. s) end
  local st = c:state()
  T.eq(st.mode, "pack", "state.mode")
  T.eq(st.pack_length, L, "state.pack_length")
  T.eq(st.pack_policy, "best_fit", "state.pack_policy")
  T.eq(st.pack_window, 24, "state.pack_window")
  T.eq(st.pack_overlong, "split", "state.pack_overlong")
  T.eq(st.start_step, 15, "state.start_step")
  local d <close> = zr.loader(streams, st)
  for s = 15, 19 do T.eq(key(d:next()), ref[s], "resumed, step " .. s) end
  t:close(); m:close()
end)

T.test("pack: ranks split the global batch; refusals", function()
  local t, m = corpus()
  local B, W = 2, 3
  local g <close> = zr.loader({ tokens = t }, { batch_size = B * W, mode = "pack", pack_length = L, seed = 4 })
  local ranks = {}
  for r = 0, W - 1 do
    ranks[r] = zr.loader({ tokens = t }, { batch_size = B, rank = r, world_size = W, mode = "pack", pack_length = L, seed = 4 })
  end
  for step = 0, 5 do
    local glob = g:next()
    local parts = {}
    for r = 0, W - 1 do parts[#parts + 1] = ranks[r]:next().tokens end
    T.eq(table.concat(parts), glob.tokens, "step " .. step)
  end
  for r = 0, W - 1 do ranks[r]:close() end
  T.raises("EINVAL: loader: mode 'pack' needs pack_length", zr.loader, { tokens = t }, { batch_size = 2, mode = "pack" })
  T.raises("EINVAL: unknown pack_policy 'worst_fit'", zr.loader, { tokens = t },
           { batch_size = 2, mode = "pack", pack_length = L, pack_policy = "worst_fit" })
  T.raises("EINVAL: unknown pack_overlong 'fold'", zr.loader, { tokens = t },
           { batch_size = 2, mode = "pack", pack_length = L, pack_overlong = "fold" })
  T.raises("EINVAL.*pack_length", zr.loader, { tokens = t }, { batch_size = 2, mode = "pack", pack_length = 0 })
  T.raises("EINVAL: loader: pack_length applies only to mode 'pack'", zr.loader, { tokens = t }, { batch_size = 2, pack_length = L })
  T.raises("EINVAL: loader: mode 'pack' adds the keys", zr.loader, { segment_ids = t }, { batch_size = 2, mode = "pack", pack_length = L })
  local dense = zr.create_dense(T.path("lbl"), "int64", {}, "raw")
  dense:append(string.rep("\0", 8 * ND))
  T.raises("EINVAL.*dense", zr.loader, { tokens = t, label = dense }, { batch_size = 2, mode = "pack", pack_length = L })
  dense:close()
  t:close(); m:close()
end)

T.run()
