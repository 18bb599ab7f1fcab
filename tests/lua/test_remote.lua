-- Stores and shard sets at URLs from Lua, against the real servers of the
-- Python suite (run under tests/remote_servers.sh: nginx serving
-- ZR_TEST_HTTP_ROOT at ZR_TEST_HTTP_URL, SeaweedFS's S3 with bucket
-- "zrtest"). Every gathered byte is compared with the same store read
-- locally, or the call must fail with an error naming the object.
local T = require "testlib"
local zr = require "zrecord"

local ROOT, URL = os.getenv("ZR_TEST_HTTP_ROOT"), os.getenv("ZR_TEST_HTTP_URL")
if ROOT == nil or URL == nil then
  print("skip: run under tests/remote_servers.sh (nginx and SeaweedFS on 127.0.0.1)")
  os.exit(0)
end
if not zr.remote_supported() then
  print("skip: this build of the libraries has no remote store support (built without libcurl)")
  os.exit(0)
end
local S3 = os.getenv("AWS_ENDPOINT_URL")

local N = 600

local function image(i)
  local v = {}
  for r = 0, 27 do
    for c = 0, 27 do v[#v + 1] = string.char((r + c + i + (i * 7 + r * 3 + c) % 4) % 256) end
  end
  return table.concat(v)
end

local function tokens(i)
  local v = {}
  for k = 0, i % 37 do v[#v + 1] = string.pack("<i4", k * 7 + i) end
  return table.concat(v)
end

-- Local stores under the served root: images (zstd), labels (raw), tokens
-- (ragged zstd) and three shards of the images under set/.
local function write(dir, name, a, b)
  local s = zr.create_dense(dir .. "/" .. name, "uint8", { 28, 28 }, "zstd")
  local recs = {}
  for i = a, b - 1 do recs[#recs + 1] = image(i) end
  s:append(table.concat(recs))
  s:close()
end
write(ROOT, "images", 0, N)
do
  local y = zr.create_dense(ROOT .. "/labels", "<i8", {}, "raw")
  local recs = {}
  for i = 0, N - 1 do recs[#recs + 1] = string.pack("<i8", i % 10) end
  y:append(table.concat(recs))
  y:close()
  local t = zr.create_ragged(ROOT .. "/tokens", "<i4", "zstd")
  local rag = {}
  for i = 0, N - 1 do rag[#rag + 1] = { shape = { i % 37 + 1 }, data = tokens(i) } end
  t:append(rag)
  t:close()
  os.execute("mkdir -p '" .. ROOT .. "/set'")
  for k, r in ipairs({ { 0, 200 }, { 200, 440 }, { 440, N } }) do write(ROOT .. "/set", "part-" .. (k - 1), r[1], r[2]) end
end

local function some_indices(n, seed)
  local idx, x = {}, seed
  for k = 1, n do x = (x * 1103515245 + 12345) % 2147483648; idx[k] = x % N end
  return idx
end

T.test("dense and ragged stores over http match local", function()
  local idx = some_indices(200, 1)
  local l <close> = zr.open(ROOT .. "/images", { readonly = true })
  local r <close> = zr.open(URL .. "/images", { readonly = true })
  T.eq(r:len(), N); T.eq(r.dtype, l.dtype); T.eq(r.item_shape[1], 28); T.eq(r.item_shape[2], 28)
  T.eq(r:gather(idx), l:gather(idx))
  T.eq(r.path, URL .. "/images")
  T.ok(r:readonly(), "a URL opens read-only")
  local t <close> = zr.open(URL .. "/tokens", { readonly = true })
  local got = t:gather(idx)
  for k, i in ipairs(idx) do T.eq(got[k].data, tokens(i), "tokens of " .. i) end
  local y <close> = zr.open(URL .. "/labels", { readonly = true })
  local lab = y:gather(idx)
  for k, i in ipairs(idx) do T.eq(string.unpack("<i8", lab, 8 * k - 7), i % 10) end
end)

T.test("a writable open of a URL is refused", function()
  T.raises("^EUNSUPPORTED.*read%-only", zr.open, URL .. "/images")
end)

T.test("a missing store is named", function()
  T.raises("^ENOTSTORE.*nothing%-here.*meta.zr is missing.*404", zr.open, URL .. "/nothing-here", { readonly = true })
  T.raises("nothing%-here", zr.concat, { URL .. "/set/part-0", URL .. "/nothing-here" })
end)

T.test("a concatenation of URLs and its loader match local", function()
  local urls = {}
  for k = 0, 2 do urls[k + 1] = URL .. "/set/part-" .. k end
  local remote <close> = zr.concat(urls)
  local localx <close> = zr.open(ROOT .. "/images", { readonly = true })
  T.eq(#remote, N); T.eq(remote.nshards, 3)
  local idx = some_indices(150, 2)
  T.eq(remote:gather(idx), localx:gather(idx))
  local a <close> = zr.loader({ x = remote }, { batch_size = 32, mode = "cyclic", seed = 3, num_workers = 2 })
  local b <close> = zr.loader({ x = localx }, { batch_size = 32, mode = "cyclic", seed = 3, num_workers = 2 })
  for _ = 1, 10 do T.eq(a:next().x, b:next().x) end
end)

T.test("s3: push, open, and a shard set", function()
  if S3 == nil then print("skip: SeaweedFS is not available (scripts/setup.sh --tests builds it)"); return end
  local url = "s3://zrtest/lua/images"
  zr.push(ROOT .. "/images", url)
  local s <close> = zr.open(url, { readonly = true })
  local l <close> = zr.open(ROOT .. "/images", { readonly = true })
  local idx = some_indices(150, 5)
  T.eq(s:len(), N); T.eq(s:gather(idx), l:gather(idx))
  T.raises("^EEXIST.*already holds a store", zr.push, ROOT .. "/images", url)
  local parts = {}
  for k = 0, 2 do parts[k + 1] = ROOT .. "/set/part-" .. k end
  zr.push_shards(parts, "s3://zrtest/lua/set")
  local c <close> = zr.concat("s3://zrtest/lua/set")
  T.eq(#c, N); T.eq(c.nshards, 3)
  local all = {}
  for i = 0, N - 1 do all[i + 1] = i end
  T.eq(c:gather(all), l:gather(all))
  local m <close> = zr.loader({ x = c }, { batch_size = 16, seed = 8 })
  local r <close> = zr.loader({ x = l }, { batch_size = 16, seed = 8 })
  for _ = 1, 5 do T.eq(m:next().x, r:next().x) end
end)

T.run()
