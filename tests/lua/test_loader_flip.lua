-- The loader's native random flips from Lua: flip = {key = p}.
local T = require "testlib"
local zr = require "zrecord"

local N, C, H, W = 20, 3, 8, 5 -- (3, 8, 5) uint8 records: an odd width
local RS = C * H * W

local function source(i)
  local b = {}
  for j = 0, RS - 1 do b[j + 1] = string.char((i * 37 + j * 11) % 256) end
  return table.concat(b)
end

-- Record r reversed along its last axis (every row of W bytes).
local function reversed(r)
  local out = {}
  for row = 0, RS // W - 1 do out[#out + 1] = r:sub(row * W + 1, row * W + W):reverse() end
  return table.concat(out)
end

local function images(kind)
  local s = zr.create_dense(T.path(kind or "img"), "uint8", { C, H, W }, "raw")
  for i = 0, N - 1 do s:append(source(i)) end
  return s
end

-- Every record of batch b's stream `key` is its source, reversed exactly
-- where the loader's mask says. Returns how many were flipped.
local function check_batch(l, b, key)
  local mask = l:flipped(key, b.step)
  T.eq(#mask, #b.indices, "mask length")
  local flipped = 0
  for k, i in ipairs(b.indices) do
    local got = b[key]:sub((k - 1) * RS + 1, k * RS)
    local want = mask[k] and reversed(source(i)) or source(i)
    T.ok(got == want, string.format("step %d record %d (index %d, mask %s)", b.step, k - 1, i,
                                    tostring(mask[k])))
    if mask[k] then flipped = flipped + 1 end
  end
  return flipped
end

T.test("p = 0.5 flips exactly the masked records, same for 1 and 2 workers", function()
  local s <close> = images()
  local a <close> = zr.loader({ image = s }, { batch_size = 4, seed = 5, num_workers = 1, flip = { image = 0.5 } })
  local b <close> = zr.loader({ image = s }, { batch_size = 4, seed = 5, num_workers = 2, flip = { image = 0.5 } })
  local flipped, total = 0, 0
  for _ = 1, 10 do
    local ba, bb = a:next(), b:next()
    T.ok(ba.image == bb.image, "step " .. ba.step .. ": 1 and 2 workers differ")
    flipped = flipped + check_batch(a, ba, "image")
    total = total + #ba.indices
  end
  T.ok(flipped > 0 and flipped < total, string.format("p = 0.5 flipped %d of %d", flipped, total))
end)

T.test("p = 1 flips every record; p = 0 none; positions as keys", function()
  local s <close> = images()
  local l <close> = zr.loader({ s }, { batch_size = 5, seed = 1, flip = { [0] = 1.0 } })
  for _ = 1, 4 do
    local b = l:next()
    b[0] = b[1] -- check_batch reads the stream by its flip key
    T.eq(check_batch(l, b, 0), 5, "flipped at p = 1")
  end
  local z <close> = zr.loader({ s }, { batch_size = 5, seed = 1, flip = { [0] = 0 } })
  local b = z:next()
  for k, i in ipairs(b.indices) do T.ok(b[1]:sub((k - 1) * RS + 1, k * RS) == source(i), "p = 0") end
end)

T.test("streams with the same p flip together; others are untouched", function()
  local s <close> = images("img")
  local m <close> = images("mask")
  local u <close> = images("plain")
  local l <close> = zr.loader({ image = s, mask = m, plain = u },
                              { batch_size = 4, seed = 8, flip = { image = 0.5, mask = 0.5 } })
  for _ = 1, 4 do
    local b = l:next()
    T.ok(b.image == b.mask, "image and mask flip together")
    check_batch(l, b, "image")
    for k, i in ipairs(b.indices) do T.ok(b.plain:sub((k - 1) * RS + 1, k * RS) == source(i), "unflipped stream") end
  end
end)

T.test("state carries the flips: a resumed loader flips the same records", function()
  local s <close> = images()
  local l <close> = zr.loader({ image = s }, { batch_size = 4, seed = 3, flip = { image = 0.5 } })
  l:next(); l:next()
  local st = l:state()
  T.eq(st.flip.image, 0.5, "state flip")
  T.eq(#st.flip, 0, "the state's flip is {key = p}, not the raw list")
  local r <close> = zr.loader({ image = s }, st)
  for _ = 1, 4 do
    local want, got = l:next(), r:next()
    T.eq(got.step, want.step)
    T.ok(got.image == want.image, "resumed step " .. got.step)
    check_batch(r, got, "image")
  end
  local nst = zr.loader({ s }, { batch_size = 4, flip = { [0] = 0.25 } }):state()
  T.eq(nst.flip[0], 0.25, "positional state flip")
  T.eq(zr.loader({ s }, { batch_size = 4 }):state().flip, nil, "no flip, no state flip")
end)

T.test("flip errors name the stream and the rule", function()
  local s <close> = images()
  local r <close> = zr.create_ragged(T.path("r"), "uint8", "raw")
  local sc <close> = zr.create_dense(T.path("sc"), "float32", {}, "raw")
  for i = 0, N - 1 do
    r:append({ shape = { i + 1 }, data = string.rep("x", i + 1) })
    sc:append(string.pack("<f", i))
  end
  local o = function(flip) return { batch_size = 4, flip = flip } end
  T.raises("^EINVAL: flip: the probability of stream 'image' must be in %[0, 1%], got 1.5",
           zr.loader, { image = s }, o({ image = 1.5 }))
  T.raises("^EINVAL: flip: the probability of stream 'image' must be in %[0, 1%]",
           zr.loader, { image = s }, o({ image = 0 / 0 }))
  T.raises("^EINVAL: flip: the probability of stream 0 must be in %[0, 1%], got %-0.1",
           zr.loader, { s }, o({ [0] = -0.1 }))
  T.raises("^EINVAL: flip: the probability of stream 'image' must be a number, got string",
           zr.loader, { image = s }, o({ image = "0.5" }))
  T.raises("^EINVAL: loader: flip: unknown stream 'label' %(streams: 'image', 'seg'%)",
           zr.loader, { image = s, seg = sc }, o({ label = 0.5 }))
  T.raises("^EINVAL: loader: flip: unknown stream 1 %(streams: positions 0 to 0%)",
           zr.loader, { s }, o({ [1] = 0.5 }))
  T.raises("^EINVAL: flip: stream 'text' is ragged; only dense records can be flipped",
           zr.loader, { image = s, text = r }, o({ text = 0.5 }))
  T.raises("^EINVAL: flip: stream 1 holds scalar records %(no axis to flip%)",
           zr.loader, { s, sc }, o({ [1] = 0.5 }))
  T.raises("^EINVAL: loader: flip must be a table", zr.loader, { s }, o(0.5))
  local l <close> = zr.loader({ image = s, seg = sc }, o({ image = 0.5 }))
  T.raises("^EINVAL: flipped: stream seg has no flip", l.flipped, l, "seg", 0)
  T.raises("^EINVAL: flipped: step must be a non%-negative integer", l.flipped, l, "image", -1)
  -- the raw form is still checked by the C loader, and lists flip as valid
  T.raises("^EINVAL: loader: unknown option 'flips' .*prefetch, readahead, flip[,%)]", zr.loader, { s }, { flips = {} })
  T.raises("^EINVAL: .*elem_size 3", zr.raw.zld_create, { s._h },
           { batch_size = 4, flip = { { stream = 0, width = 5, elem_size = 3, p = 0.5 } } })
end)

T.run()
