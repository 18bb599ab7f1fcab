-- zrecord.lua - the idiomatic Lua layer of the `zrecord` module.
--
-- Compiled into zrecord.so as a string and run once by luaopen_zrecord with
-- the raw SWIG table as its argument; what it returns is what
-- `require "zrecord"` gives. The raw table stays reachable as `.raw`.
--
-- Conventions:
--   * record indices are 0-based, as in every loaderx-in-C language, and
--     negative indices wrap (-1 is the last record); every number in an
--     error message is 0-based too: a record index, or the position of an
--     entry in a table argument ("record 0" of an append is records[1],
--     "stream 1" of a loader is streams[2]);
--   * records are Lua strings of raw little-endian bytes (dense: exactly
--     record_size bytes; ragged: {shape = {...}, data = "..."});
--   * errors are raised as strings "<CODE>: <detail>" (EINVAL, ERANGE,
--     EBUSY, ECLOSED, ...), never a crash;
--   * every handle closes on :close(), at the end of a `local x <close>`
--     scope, and on garbage collection, whichever comes first, in any
--     order: a loader borrows its stores in C, and closing a store under
--     it turns its next() into ECLOSED naming the store.

local raw = ...
local M = { raw = raw }

local function fail(code, fmt, ...)
  error(code .. ": " .. string.format(fmt, ...), 0)
end

M.version = raw.zloader_version_string()

-- --------------------------------------------------------------- dtypes

M.DTYPES = {}
for i = 0, raw.ZRS_DTYPE_COUNT - 1 do M.DTYPES[#M.DTYPES + 1] = raw.zrs_dtype_str(i) end

local function dtype_id(dtype)
  if type(dtype) ~= "string" then
    fail("EINVAL", "dtype must be a string such as '<f4' or 'float32', got %s", type(dtype))
  end
  return raw.zr_dtype_from_name(dtype) -- numpy's strings and names: zrs_dtype_from_name
end

--- Bytes per element of a dtype ('<f4' or 'float32' -> 4).
function M.itemsize(dtype) return raw.zrs_dtype_itemsize(dtype_id(dtype)) end

-- codec: a name ("zstd" when nil), or {codec = name, dict = bytes} for
-- "zstd_dict". Returns the codec id and the dictionary (or nil).
local function codec_id(codec)
  local dict
  if type(codec) == "table" then codec, dict = codec.codec, codec.dict end
  if codec == nil then codec = "zstd" end
  if type(codec) ~= "string" then
    fail("EINVAL", "codec must be 'raw', 'zstd' or 'zstd_dict', got %s", type(codec))
  end
  return raw.zre_codec_parse(codec), dict
end

local function check_path(path)
  if type(path) ~= "string" then fail("EINVAL", "path must be a string, got %s", type(path)) end
  return path
end

-- Dictionary tiers, as in Python's loaderx.utils.DICT_TIERS: name -> the C
-- tier (its dictionary and sample sizes come from zrs_dict_tier_sizes).
local DICT_TIERS = { fast = raw.ZRS_DICT_FAST, balanced = raw.ZRS_DICT_BALANCED, max = raw.ZRS_DICT_MAX }
M.DICT_TIERS = {}
for name, tier in pairs(DICT_TIERS) do
  local dict_bytes, sample_bytes = raw.zrs_dict_tier_sizes(tier)
  M.DICT_TIERS[name] = { dict_bytes = dict_bytes, sample_bytes = sample_bytes }
end

--- Train a zstd dictionary from sample records (a table of strings of
--- raw bytes, in index order) for codec {codec = "zstd_dict", dict = ...};
--- returns it as a string. tier: "fast" (32 KiB dictionary, 4 MiB
--- sample), "balanced" (128 KiB, 16 MiB; the default) or "max" (1 MiB,
--- 64 MiB), never a number. The library's one sample rule (as in Python
--- and zr) picks the records: those whose index is a multiple of a stride
--- that doubles from 1 until they fit the tier's sample bytes. EINVAL for
--- an unknown tier, a sample that is not a string, or data zstd cannot
--- train on (too little or too uniform).
function M.train_dict(samples, tier)
  if tier == nil then tier = "balanced" end
  if type(tier) ~= "string" or DICT_TIERS[tier] == nil then
    fail("EINVAL", "train_dict: unknown dictionary tier %s; expected 'fast', 'balanced' or 'max'",
         type(tier) == "string" and string.format("%q", tier) or tostring(tier))
  end
  return raw.train_dict(samples, DICT_TIERS[tier])
end

--- A zero-filled writable buffer of n bytes, reusable as a gather target.
M.buffer = raw.buffer

-- ---------------------------------------------------------------- stores

local Store = {}
Store.__index = Store
Store.__name = "zrecord.store"

local function handle(self)
  local h = rawget(self, "_h")
  if h == nil then fail("ECLOSED", "%s store %s is closed", self.kind, self.path) end
  return h
end

local function wrap_store(h)
  local kind = raw.zrs_get_kind(h) == raw.ZRS_DENSE and "dense" or "ragged"
  local self = {
    _h = h,
    kind = kind,
    path = raw.zrs_path(h),
    dtype = raw.zrs_dtype_str(raw.zrs_get_dtype(h)),
    codec = raw.zre_codec_name(raw.zrs_get_codec(h)),
    itemsize = raw.zrs_dtype_itemsize(raw.zrs_get_dtype(h)),
  }
  if kind == "dense" then
    self.item_shape = raw.item_shape(h)
    self.record_size = raw.zrs_record_size(h)
  end
  return setmetatable(self, Store)
end

--- Create a dense store: records of `dtype` and shape `item_shape` (a
--- table of integers; {} for scalars). codec: "zstd" (default) or "raw".
function M.create_dense(path, dtype, item_shape, codec)
  if type(item_shape) ~= "table" then
    fail("EINVAL", "item_shape must be a table of integers, got %s", type(item_shape))
  end
  local c, dict = codec_id(codec)
  if dict ~= nil or not raw.zrs_create_dense then
    return wrap_store(raw.zrs_create_dense_dict(check_path(path), dtype_id(dtype), item_shape, c, dict))
  end
  return wrap_store(raw.zrs_create_dense(check_path(path), dtype_id(dtype), item_shape, c))
end

--- Create a ragged store of `dtype`: every record keeps its own shape.
function M.create_ragged(path, dtype, codec)
  local c, dict = codec_id(codec)
  if dict ~= nil then
    return wrap_store(raw.zrs_create_ragged_dict(check_path(path), dtype_id(dtype), c, dict))
  end
  return wrap_store(raw.zrs_create_ragged(check_path(path), dtype_id(dtype), c))
end

--- Open an existing store (dense or ragged, as the store says).
--- opts.readonly = true opens a reader (any number beside one writer).
--- opts.recover = true (writable only): after a crash or power loss lost
--- appends that were never synced, keep every record that reached the
--- disk and rewrite the header to them; a plain open refuses such a store.
--- Both at once is EINVAL.
function M.open(path, opts)
  check_path(path)
  if opts ~= nil and type(opts) ~= "table" then
    fail("EINVAL", "open: options must be a table, got %s", type(opts))
  end
  local flags = 0
  if opts and opts.readonly then flags = flags | raw.ZRE_OPEN_READONLY end
  if opts and opts.recover then flags = flags | raw.ZRE_OPEN_RECOVER end
  if flags ~= 0 then
    return wrap_store(raw.zrs_open_ex(path, flags))
  end
  return wrap_store(raw.zrs_open(path))
end

local function open_kind(kind)
  return function(path)
    local s = M.open(path)
    if s.kind ~= kind then
      s:close()
      fail("EINVAL", "%s is a %s store, not a %s store", path, s.kind, kind)
    end
    return s
  end
end
M.open_dense = open_kind("dense")
M.open_ragged = open_kind("ragged")

function Store:len() return raw.zrs_length(handle(self)) end
Store.__len = Store.len

function Store:closed() return rawget(self, "_h") == nil end

--- Append records; returns the index of the first new one.
--- dense:  one string (or buffer) of n * record_size bytes (n records).
--- ragged: a table of records {shape = {...}, data = "..."}, or one record.
--- Zero records ("" or {}) append nothing and return #store, for both
--- kinds (as in Python).
function Store:append(records)
  local h = handle(self)
  if self.kind == "dense" then
    local n
    if type(records) == "string" then n = #records
    elseif type(records) == "userdata" then n = #records
    else fail("EINVAL", "append: dense records must be a string or buffer, got %s", type(records)) end
    if n == 0 then return raw.zrs_length(h) end
    if n % self.record_size ~= 0 then
      fail("EINVAL", "append: %d bytes is not a multiple of the record size %d",
           n, self.record_size)
    end
    return raw.zrs_append_dense(h, records, n // self.record_size)
  end
  if type(records) ~= "table" then
    fail("EINVAL", "append: ragged records must be a table, got %s", type(records))
  end
  if records.data ~= nil or records.shape ~= nil then records = { records } end
  return raw.append_ragged(h, records)
end

--- Gather records by a table of 0-based indices (negatives wrap).
--- dense: one string, record k at byte (k-1) * record_size.
--- ragged: a table of {shape = {...}, data = "..."}.
function Store:gather(indices)
  local h = handle(self)
  if self.kind == "dense" then return raw.gather_dense(h, indices) end
  return raw.gather_ragged(h, indices)
end

--- Dense only: gather into a zrecord buffer (reused across calls, no
--- allocation); #indices * record_size must fit. Returns the buffer.
function Store:gather_into(buf, indices)
  local h = handle(self)
  if self.kind ~= "dense" then fail("EINVAL", "gather_into: %s is a ragged store", self.path) end
  raw.zrs_gather_dense(h, indices, buf)
  return buf
end

--- One record by 0-based index (negatives wrap): a string (dense) or a
--- {shape = {...}, data = "..."} table (ragged).
function Store:get(i)
  local r = self:gather({ i })
  if self.kind == "dense" then return r end
  return r[1]
end

--- Make everything durable now.
function Store:sync()
  if raw.zrs_sync then raw.zrs_sync(handle(self)) else raw.zre_sync(raw.zrs_engine(handle(self))) end
end

--- Read-only handle: see the records committed since it opened or last
--- refreshed; returns the new length. A reader's length changes only
--- here. Writable handle: sees its own appends already; returns its length.
function Store:refresh()
  local h = handle(self)
  raw.zrs_refresh(h)
  return raw.zrs_length(h)
end

--- True for a handle opened with {readonly = true}.
function Store:readonly()
  return raw.zrs_is_readonly ~= nil and raw.zrs_is_readonly(handle(self)) or false
end

--- Delete records by a table of 0-based indices (negatives wrap), by
--- swap-last: the last records move into the holes.
function Store:delete(indices)
  if not raw.zrs_delete then fail("EUNSUPPORTED", "delete is not in this build") end
  raw.zrs_delete(handle(self), indices)
end

--- Reclaim the bytes of deleted records in place.
function Store:compact()
  if not raw.zrs_compact then fail("EUNSUPPORTED", "compact is not in this build") end
  raw.zrs_compact(handle(self))
end

--- Space accounting: {records, logical_bytes, live_bytes, chunk_bytes, reclaimable}.
function Store:stats() return raw.zre_get_stats(raw.zrs_engine(handle(self))) end

function Store:info()
  return {
    kind = self.kind, dtype = self.dtype, codec = self.codec, path = self.path,
    records = self:len(), item_shape = self.item_shape,
  }
end

--- Sync, release the lock and the handle. Idempotent. A loader still
--- reading this store keeps the library's handle alive (a borrow) and
--- fails with ECLOSED, naming the store, from its next step on.
function Store:close()
  local h = rawget(self, "_h")
  if h == nil then return end
  self._h = nil
  raw.zrs_close(h)
end

Store.__close = function(self) self:close() end
Store.__gc = function(self) pcall(Store.close, self) end
Store.__tostring = function(self)
  if rawget(self, "_h") == nil then return string.format("zrecord.%s_store(%s, closed)", self.kind, self.path) end
  return string.format("zrecord.%s_store(%s, %s, %d records)", self.kind, self.path, self.dtype, self:len())
end

-- --------------------------------------------------------------- sampler

local Sampler = {}
Sampler.__index = Sampler
Sampler.__name = "zrecord.sampler"

--- A sampler: {length=, batch_size=, mode="cyclic"|"iid"|"sequential",
--- seed=0, rank=0, world_size=1}. Pure function of (seed, step).
function M.sampler(cfg)
  if type(cfg) ~= "table" then fail("EINVAL", "sampler: config must be a table, got %s", type(cfg)) end
  local c = {}
  for k, v in pairs(cfg) do c[k] = v end
  c.mode = c.mode or "cyclic"
  raw.sampler_indices(c, 0) -- validates the configuration now
  return setmetatable({ config = c, step = 0 }, Sampler)
end

--- This rank's 0-based indices for `step` (a table of batch_size integers).
function Sampler:indices(step) return raw.sampler_indices(self.config, step) end

--- The indices of the current step, then advance.
function Sampler:next()
  local idx = raw.sampler_indices(self.config, self.step)
  self.step = self.step + 1
  return idx
end

function Sampler:seek(step)
  if math.type(step) ~= "integer" or step < 0 then
    fail("EINVAL", "seek: step must be a non-negative integer, got %s", tostring(step))
  end
  self.step = step
end


-- ---------------------------------------------------- shards and mixtures

local Concat = {}
Concat.__index = Concat
Concat.__name = "zrecord.concat"

-- A raw list (zr_bind_set) filled by add(set, item) for each item of
-- `items`, closed when f returns or raises.
local function with_set(items, add, f)
  local set = raw.zr_bind_set_new()
  local ok, a, b = pcall(function()
    for _, it in ipairs(items) do add(set, it) end
    return f(set)
  end)
  raw.zr_bind_set_free(set)
  if not ok then error(a, 0) end
  return a, b
end

local function concat_handle(self)
  local h = rawget(self, "_h")
  if h == nil or raw.zrs_concat_is_closed(h) then
    fail("ECLOSED", "concatenation %s is closed", self.path)
  end
  return h
end

--- Shards of one identity (the same dtype and item_shape, or the same
--- ragged dtype) read as one store. `shards`: a path or URL (a store, or
--- a shard set pushed with push_shards: every shard its manifest lists),
--- a table of paths and URLs, or a table of open stores (borrowed: they
--- stay yours, and closing one closes the concatenation first).
--- opts.readonly (default true) opens paths as readers; a URL is always
--- read-only. EINVAL naming both shards for an identity mismatch.
function M.concat(shards, opts)
  if opts ~= nil and type(opts) ~= "table" then
    fail("EINVAL", "concat: options must be a table, got %s", type(opts))
  end
  if type(shards) == "string" then shards = { shards } end
  if type(shards) ~= "table" or #shards == 0 then
    fail("EINVAL", "concat: shards must be a path or a non-empty table of paths or stores, got %s",
         type(shards) == "table" and "an empty table" or type(shards))
  end
  local stores = getmetatable(shards[1]) == Store
  for k, it in ipairs(shards) do
    if stores ~= (getmetatable(it) == Store) or (not stores and type(it) ~= "string") then
      fail("EINVAL", "concat: shard %d is a %s; shards must be all paths or all stores",
           k - 1, type(it))
    end
    if stores and rawget(it, "_h") == nil then
      fail("ECLOSED", "concat: shard %d (%s) is closed", k - 1, it.path)
    end
  end
  local h
  if stores then
    h = with_set(shards, function(set, st) raw.zr_bind_set_add_store(set, handle(st)) end,
                 function(set) return raw.zr_bind_concat_create(set) end)
  else
    local flags = (opts == nil or opts.readonly ~= false) and raw.ZRE_OPEN_READONLY or 0
    h = with_set(shards, raw.zr_bind_set_add_path,
                 function(set) return raw.zr_bind_concat_open(set, flags) end)
  end
  local kind = raw.zrs_concat_kind(h) == raw.ZRS_DENSE and "dense" or "ragged"
  local self = setmetatable({
    _h = h, _borrowed = stores and shards or {},
    kind = kind, ragged = kind == "ragged",
    dtype = raw.zrs_dtype_str(raw.zrs_concat_dtype(h)),
    path = raw.zrs_path(raw.zrs_concat_shard(h, 0)),
    nshards = raw.zrs_concat_count(h),
  }, Concat)
  self.itemsize = raw.zrs_dtype_itemsize(raw.zrs_concat_dtype(h))
  if kind == "dense" then
    self.record_size = raw.zrs_concat_record_size(h)
    self.item_shape = {}
    for k = 1, raw.zrs_concat_item_ndim(h) do self.item_shape[k] = raw.zr_bind_concat_dim(h, k - 1) end
  end
  return self
end

function Concat:len() return raw.zrs_concat_length(concat_handle(self)) end
Concat.__len = Concat.len
--- True once closed, or once a store it borrows was closed.
function Concat:closed()
  local h = rawget(self, "_h")
  return h == nil or raw.zrs_concat_is_closed(h)
end

--- The shards' paths (or URLs), in order.
function Concat:paths()
  local h, out = concat_handle(self), {}
  for k = 1, raw.zrs_concat_count(h) do out[k] = raw.zrs_path(raw.zrs_concat_shard(h, k - 1)) end
  return out
end

--- The first global index of each shard, then the total: nshards + 1 integers.
function Concat:offsets()
  local h, out = concat_handle(self), {}
  for k = 0, raw.zrs_concat_count(h) do out[k + 1] = raw.zrs_concat_offset(h, k) end
  return out
end

--- Gather by a table of 0-based global indices (negatives wrap), as a
--- store's gather: dense one string, ragged a table of records.
function Concat:gather(indices)
  local h = concat_handle(self)
  if self.kind == "ragged" then return raw.gather_ragged(h, indices) end
  if type(indices) ~= "table" then
    fail("EINVAL", "gather: index must be a table of integers, got %s", type(indices))
  end
  local buf = raw.buffer(#indices * self.record_size)
  raw.zrs_concat_gather_dense(h, indices, buf)
  return buf:tostring()
end

--- Dense only: gather into a zrecord buffer (reused across calls), as a
--- store's gather_into. Returns the buffer.
function Concat:gather_into(buf, indices)
  local h = concat_handle(self)
  if self.kind ~= "dense" then fail("EINVAL", "gather_into: %s is a ragged concatenation", self.path) end
  raw.zrs_concat_gather_dense(h, indices, buf)
  return buf
end

Concat.get = Store.get -- one record by 0-based global index, as a store's

--- Close it, and the shards it opened from paths (borrowed stores stay
--- open). Idempotent. Loaders reading it fail with ECLOSED from then on.
function Concat:close()
  local h = rawget(self, "_h")
  if h == nil then return end
  self._h = nil
  raw.zrs_concat_close(h)
end

Concat.__close = function(self) self:close() end
Concat.__gc = function(self) pcall(Concat.close, self) end
Concat.__tostring = function(self)
  if rawget(self, "_h") == nil then return string.format("zrecord.concat(%s, closed)", self.path) end
  return string.format("zrecord.concat(%d %s shards, %s, %d records)", self.nshards, self.kind,
                       self.dtype, self:len())
end

--- True when the libraries open stores at URLs (built with libcurl);
--- without, a URL raises EUNSUPPORTED.
function M.remote_supported() return raw.zre_remote_supported() ~= 0 end

--- Upload the local store at `path` to `url` (http(s):// PUT or
--- s3://bucket/prefix), meta.zr last, so open(url, {readonly = true})
--- opens it once it is complete. EEXIST when the URL already holds a store.
function M.push(path, url)
  check_path(path)
  if type(url) ~= "string" then fail("EINVAL", "push: url must be a string, got %s", type(url)) end
  raw.zr_bind_push(path, url)
end

--- Upload local shards (a table of paths) to `url` as a shard set: each
--- shard to url/<its folder name>, then the manifest last, so
--- concat(url) opens the whole set only once it is complete.
function M.push_shards(paths, url)
  if type(paths) ~= "table" then fail("EINVAL", "push_shards: paths must be a table, got %s", type(paths)) end
  if type(url) ~= "string" then fail("EINVAL", "push_shards: url must be a string, got %s", type(url)) end
  with_set(paths, raw.zr_bind_set_add_path, function(set) raw.zr_bind_push_shards(set, url) end)
end

local Mixture = {}
Mixture.__index = Mixture
Mixture.__name = "zrecord.mixture"

--- Several datasets sampled by weight. sources: a table name -> dataset
--- (or a list, named 0, 1, ...), a dataset being a table stream name ->
--- store, concatenation, path or table of paths, with the same stream
--- names in every source. weights: name -> number (or a list in source
--- order), relative, each finite and > 0. modes: nil (the loader's mode),
--- one mode name for all, or name -> mode. Pass the mixture to loader() in
--- place of the streams: each batch position draws its source by weight
--- and its index inside the source by that source's mode, a pure function
--- of (seed, step, rank).
function M.mixture(sources, weights, modes)
  if type(sources) ~= "table" then fail("EINVAL", "mixture: sources must be a table, got %s", type(sources)) end
  local names = {}
  if #sources > 0 then
    for k = 1, #sources do names[k] = k - 1 end
  else
    for n in pairs(sources) do names[#names + 1] = n end
    table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
  end
  if #names == 0 then fail("EINVAL", "mixture: a mixture needs at least one source") end
  local function by_name(t, n) if #sources > 0 then return t[n + 1] end return t[n] end
  if type(weights) ~= "table" then fail("EINVAL", "mixture: weights must be a table, got %s", type(weights)) end
  local w, md = {}, {}
  for k, n in ipairs(names) do
    w[k] = by_name(weights, n)
    if type(w[k]) ~= "number" or not (w[k] > 0) or w[k] == math.huge then
      fail("EINVAL", "mixture: weight of source %s is %s, expected a finite number > 0", tostring(n), tostring(w[k]))
    end
    if type(modes) == "table" then md[k] = by_name(modes, n) else md[k] = modes end
  end
  local streams
  local self = setmetatable({ names = names, weights = w, modes = md, _concats = {}, _owned = {} },
                           Mixture)
  local ok, err = pcall(function()
    for k, n in ipairs(names) do
      local ds = sources[#sources > 0 and k or n]
      if type(ds) ~= "table" or next(ds) == nil then
        fail("EINVAL", "mixture: source %s must be a non-empty table {stream = store}", tostring(n))
      end
      local keys = {}
      for key in pairs(ds) do keys[#keys + 1] = key end
      table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
      if streams == nil then streams = keys
      elseif table.concat(keys, ",") ~= table.concat(streams, ",") then
        fail("EINVAL", "mixture: source %s has streams {%s}, the first source has {%s}: every "
             .. "source needs the same stream names", tostring(n), table.concat(keys, ", "),
             table.concat(streams, ", "))
      end
      local row = {}
      for j, key in ipairs(streams) do
        local v = ds[key]
        if getmetatable(v) == Concat then row[j] = v
        else
          row[j] = M.concat(getmetatable(v) == Store and { v } or v)
          self._owned[#self._owned + 1] = row[j]
        end
      end
      self._concats[k] = row
    end
  end)
  if not ok then
    for _, c in ipairs(self._owned) do c:close() end
    error(err, 0)
  end
  self.streams = streams
  local total = 0
  for _, x in ipairs(w) do total = total + x end
  self.shares = {}
  for k, n in ipairs(names) do self.shares[n] = w[k] / total end
  return self
end

--- Records per source, by name.
function Mixture:lengths()
  local out = {}
  for k, n in ipairs(self.names) do out[n] = self._concats[k][1]:len() end
  return out
end

-- The native mixture for one loader's batch_size, mode, seed and
-- world_size, and the raw stream list of its streams.
function Mixture:_bind(opts)
  if self._closed then fail("ECLOSED", "mixture is closed") end
  local mode = opts.mode or "cyclic"
  local concats, weights = {}, {}
  for k, row in ipairs(self._concats) do
    weights[k] = { self.weights[k], self.modes[k] or mode }
    for _, c in ipairs(row) do concats[#concats + 1] = concat_handle(c) end
  end
  local m = with_set(concats, raw.zr_bind_set_add_concat, function(cset)
    return with_set(weights, function(set, wm) raw.zr_bind_set_add_weight(set, wm[1], wm[2]) end,
      function(wset)
        return raw.zr_bind_mixture_create(cset, wset, #self.streams, opts.seed or 0,
                                          opts.batch_size or 256, opts.world_size or 1)
      end)
  end)
  return m
end

--- (sources, indices) of a mixture loader's batch: the source name and
--- the index inside that source of each of `indices` (the batch's
--- virtual indices, batch.indices).
function Mixture:locate(loader, indices)
  local m = rawget(loader, "_mixture")
  if m == nil or rawget(loader, "_mixture_of") ~= self then
    fail("EINVAL", "locate: this loader does not read this mixture")
  end
  if rawget(loader, "_h") == nil then fail("ECLOSED", "loader is closed") end
  local src, idx = {}, {}
  for k, v in ipairs(indices) do
    local s, i = raw.zr_bind_mixture_locate(m, v)
    src[k], idx[k] = self.names[s + 1], i
  end
  return src, idx
end

--- Close the shards it opened; loaders reading this mixture fail with
--- ECLOSED from then on.
function Mixture:close()
  if self._closed then return end
  self._closed = true
  for _, c in ipairs(self._owned) do c:close() end
end
Mixture.__close = function(self) self:close() end
Mixture.__gc = function(self) pcall(Mixture.close, self) end

-- ---------------------------------------------------------------- loader

local Loader = {}
Loader.__index = Loader
Loader.__name = "zrecord.loader"

-- How an error names stream i (1-based position in the stream list): by
-- its key when the streams were given by name, else by its 0-based
-- position.
local function stream_label(names, i)
  if names then return string.format("stream '%s'", tostring(names[i])) end
  return string.format("stream %d", i - 1)
end

-- Rewrite the C library's "stream N" (0-based) into "stream 'name'".
local function rename_streams(names, err)
  if names == nil or type(err) ~= "string" then return err end
  return (err:gsub("stream (%d+)", function(n)
    local name = names[tonumber(n) + 1]
    if name ~= nil then return string.format("stream '%s'", tostring(name)) end
  end))
end

-- opts.flip = {key = p} -> opts.flip in the raw form (a list of {stream,
-- width, elem_size, p} entries) and the loader's own {key, stream, p} list. A key is a
-- stream's name (named streams) or its 0-based position (a list).
local function resolve_flips(opts, list, names, handles)
  local flip = opts.flip
  opts.flip = nil
  if flip == nil then return {} end
  if type(flip) ~= "table" then
    fail("EINVAL", "loader: flip must be a table {stream = probability}, got %s", type(flip))
  end
  local keys = {}
  for key in pairs(flip) do keys[#keys + 1] = key end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local out, raws = {}, {}
  for _, key in ipairs(keys) do
    local p, i, width, elem_size = flip[key], nil, nil, nil
    if names then -- by name: the C rule (zld_flip_by_name) finds and checks the stream
      i, width, elem_size = raw.flip_by_name(handles, names, tostring(key), p)
    elseif math.type(key) == "integer" and key >= 0 and key < #list then
      i = key
      width, elem_size = raw.flip_params(handles[i + 1], i, p)
    else
      fail("EINVAL", "loader: flip: unknown stream %s (streams: positions 0 to %d)",
           type(key) == "string" and string.format("'%s'", key) or tostring(key), #list - 1)
    end
    raws[#raws + 1] = { stream = i, width = width, elem_size = elem_size, p = p }
    out[#out + 1] = { key = key, stream = i, p = p }
  end
  opts.flip = raws
  return out
end

-- ------------------------------------------- passes, bucketing, packing

-- What a pack-mode batch adds after its streams.
local PACK_KEYS = { "segment_ids", "positions", "seq_lens", "cu_seqlens" }
local PACK_OPTIONS = { "pack_length", "pack_policy", "pack_window", "pack_overlong" }

-- mode = "bucket" (lengths, window) and mode = "pack" (pack_*) -> the raw
-- options (the cyclic order with bucket_lengths, or pack = true). Returns
-- whether the loader packs.
local function loader_modes(opts, names)
  local mode = opts.mode
  if type(mode) == "string" then mode = mode:lower() end
  if mode == "bucket" then
    if opts.lengths == nil then
      fail("EINVAL", "loader: mode 'bucket' needs lengths (one length per record)")
    end
    opts.mode, opts.bucket_lengths, opts.bucket_window = "cyclic", opts.lengths, opts.window
    opts.lengths, opts.window = nil, nil
  else
    for _, k in ipairs({ "lengths", "window" }) do
      if opts[k] ~= nil then fail("EINVAL", "loader: %s applies only to mode 'bucket'", k) end
    end
  end
  if mode == "pack" then
    if opts.pack_length == nil then
      fail("EINVAL", "loader: mode 'pack' needs pack_length (elements per row)")
    end
    for _, key in ipairs(PACK_KEYS) do
      for _, name in ipairs(names or {}) do
        if name == key then
          fail("EINVAL", "loader: mode 'pack' adds the keys %s to each batch, and a stream is named '%s'; rename the stream",
               table.concat(PACK_KEYS, ", "), key)
        end
      end
    end
    opts.mode, opts.pack = "cyclic", true
    return true
  end
  if opts.pack then return true end -- a state's raw form
  for _, k in ipairs(PACK_OPTIONS) do
    if opts[k] ~= nil then fail("EINVAL", "loader: %s applies only to mode 'pack'", k) end
  end
  return false
end

-- string.pack formats of the dtypes a pad value can be given for as a number.
local PACK_FORMATS = {
  ["|b1"] = "B", ["|i1"] = "i1", ["<i2"] = "<i2", ["<i4"] = "<i4", ["<i8"] = "<i8",
  ["|u1"] = "B", ["<u2"] = "<I2", ["<u4"] = "<I4", ["<u8"] = "<I8",
  ["<f4"] = "<f", ["<f8"] = "<d",
}

--- Stack ragged records (a ragged stream's table from a batch: {shape =
--- {n_i, ...}, data = "..."} of one dtype and one trailing shape) into one
--- dense block (#records, length, ...) in native code: each record's first
--- min(n_i, length) elements (an element is everything after the first
--- axis), then pad_value. length nil pads to the longest record.
--- pad_value: a number (0 when nil), or a string of one element's bytes.
--- Returns the block (a string of raw little-endian bytes) and the n_i (a
--- table, before any cut). EINVAL for a record of another trailing shape
--- (named by its 0-based position) or a pad value that does not fit.
function M.pad(records, dtype, length, pad_value)
  if type(records) ~= "table" or #records == 0 then
    fail("EINVAL", "pad: records must be a non-empty table of {shape, data} records")
  end
  local dt = raw.zrs_dtype_str(dtype_id(dtype))
  local inner = records[1].shape
  if type(inner) ~= "table" or #inner < 1 then
    fail("EINVAL", "pad: record 0 needs a shape of at least one dimension")
  end
  local elem = raw.zrs_dtype_itemsize(dtype_id(dtype))
  for d = 2, #inner do elem = elem * inner[d] end
  local datas = {}
  for i, r in ipairs(records) do
    local sh = type(r) == "table" and r.shape
    local same = type(sh) == "table" and #sh == #inner and type(r.data) == "string"
    for d = 2, #inner do same = same and sh[d] == inner[d] end
    if not same then
      fail("EINVAL", "pad: record %d has another trailing shape than record 0 (all records need shape (n, ...) and one dtype)", i - 1)
    end
    datas[i] = r.data
  end
  if length ~= nil and (math.type(length) ~= "integer" or length < 0) then
    fail("EINVAL", "pad: length must be a non-negative integer or nil, got %s", tostring(length))
  end
  local fill = pad_value or 0
  if type(fill) == "number" then
    local fmt = PACK_FORMATS[dt]
    if fmt == nil then
      if fill ~= 0 then fail("EINVAL", "pad: give the pad value of dtype %s as a string of its bytes", dt) end
      fill = string.rep("\0", raw.zrs_dtype_itemsize(dtype_id(dtype)))
    else
      local ok, b = pcall(string.pack, fmt, fill)
      if not ok then fail("EINVAL", "pad: pad value %s does not fit dtype %s", tostring(pad_value), dt) end
      fill = b
    end
    fill = string.rep(fill, elem // #fill)
  end
  if type(fill) ~= "string" or #fill ~= elem then
    fail("EINVAL", "pad: the pad value must be a number or a string of %d bytes (one element)", elem)
  end
  return raw.pad(datas, elem, length or -1, fill)
end

--- An endless loader over index-aligned stores `streams` (a table of
--- stores, or a table name -> store). options: batch_size (256), mode
--- ("cyclic"), seed, start_step, rank, world_size, num_workers, prefetch,
--- readahead, flip; any other key is an EINVAL error naming it.
--- flip = {key = p}: flip each record of those dense streams along its
--- last axis with probability p (a horizontal flip of (C, H, W) or (H, W)
--- images), natively in the workers. key is the stream's name (named
--- streams) or its 0-based position (a list of streams). Which records
--- flip is a pure function of (seed, step, position in the global batch):
--- the same for any worker count and on resume, and streams given the
--- same p flip together. EINVAL for an unknown, ragged or scalar stream,
--- a dtype whose itemsize is not 1, 2, 4 or 8, or p outside [0, 1].
--- mode = "bucket" with lengths (one per record) and window: batches of
--- records of similar length. mode = "pack" with pack_length, pack_policy,
--- pack_window, pack_overlong: documents of ragged streams packed into
--- rows (see Loader:next). pass = true (or zrecord.pass_loader): one
--- finite pass, with shuffle, epoch, drop_last, even_batches.
function M.loader(streams, options)
  if type(streams) ~= "table" then fail("EINVAL", "loader: streams must be a table of stores, got %s", type(streams)) end
  if options ~= nil and type(options) ~= "table" then
    fail("EINVAL", "loader: options must be a table, got %s", type(options))
  end
  local opts = {}
  for k, v in pairs(options or {}) do opts[k] = v end
  local list, names = {}, nil
  local mixture, mix, mix_mode = nil, nil, nil
  if getmetatable(streams) == Mixture then
    -- the mixture draws sources and indices; the loader walks its virtual
    -- index space in order
    mixture, names = streams, streams.streams
    local m = type(opts.mode) == "string" and opts.mode:lower() or nil
    if m == "bucket" or m == "pack" then
      fail("EINVAL", "loader: mode '%s' does not apply to a mixture (each source has its own mode)", m)
    end
    mix = mixture:_bind(opts)
    mix_mode = opts.mode or "cyclic" -- the sources' default, for state()
    opts.mode = "sequential"
    for i = 1, #names do list[i] = mixture._concats[1][i] end
  elseif #streams > 0 then
    for i, s in ipairs(streams) do list[i] = s end
  else
    names = {}
    for name in pairs(streams) do names[#names + 1] = name end
    table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
    for i, name in ipairs(names) do list[i] = streams[name] end
  end
  -- handles: the raw stream handles; stores: a store of each stream (for
  -- flips: shard 0 of a concatenation, which has the stream's identity)
  local handles, stores, dtypes = {}, {}, {}
  for i, s in ipairs(list) do
    local mt = getmetatable(s)
    if mt == M.MrecStream then
      if s:closed() then
        if mix then raw.zld_mixture_free(mix) end
        fail("ECLOSED", "loader: %s: mrec stream %s of %s is closed", stream_label(names, i), s.name, s._source.path)
      end
      if opts.flip ~= nil then
        if mix then raw.zld_mixture_free(mix) end
        fail("EINVAL", "loader: flip applies to stores, and %s is an mrec stream", stream_label(names, i))
      end
      handles[i], dtypes[i] = false, dtype_id(s.dtype)
    elseif mt ~= Store and mt ~= Concat then
      if mix then raw.zld_mixture_free(mix) end
      fail("EINVAL", "loader: %s is not a zrecord store or concatenation, got %s", stream_label(names, i), type(s))
    elseif rawget(s, "_h") == nil then
      if mix then raw.zld_mixture_free(mix) end
      fail("ECLOSED", "loader: %s: %s %s is closed", stream_label(names, i), s.kind,
           mt == Store and ("store " .. s.path) or ("concatenation " .. s.path))
    end
    if mt == M.MrecStream then
    elseif mt == Store then
      handles[i] = rawget(s, "_h")
      stores[i], dtypes[i] = handles[i], raw.zrs_get_dtype(handles[i])
    else
      handles[i] = rawget(s, "_h")
      stores[i], dtypes[i] = raw.zrs_concat_shard(handles[i], 0), raw.zrs_concat_dtype(handles[i])
    end
  end
  local ok0, pack = pcall(loader_modes, opts, names)
  if not ok0 then
    if mix then raw.zld_mixture_free(mix) end
    error(pack, 0)
  end
  local ok, h = pcall(function()
    local flips = resolve_flips(opts, list, names, stores)
    local set = raw.zr_bind_set_new()
    local ok2, h2 = pcall(function()
      for i, s in ipairs(list) do
        if mix then raw.zr_bind_set_add_mixture(set, mix, i - 1)
        elseif getmetatable(s) == M.MrecStream then raw.zr_bind_set_add_mrec(set, s._source._h, s._which)
        elseif getmetatable(s) == Store then raw.zr_bind_set_add_store(set, handles[i])
        else raw.zr_bind_set_add_concat(set, handles[i]) end
      end
      return raw.zr_bind_loader_create(set, opts)
    end)
    raw.zr_bind_set_free(set)
    if not ok2 then error(h2, 0) end
    return { h2, flips }
  end)
  if not ok then
    if mix then raw.zld_mixture_free(mix) end
    error(rename_streams(names, h), 0)
  end
  local self = setmetatable({ _h = h[1], _streams = mixture and { mixture } or list, _names = names,
                              _dtypes = dtypes, _flips = h[2], _mixture = mix,
                              _mixture_of = mixture, _mix_mode = mix_mode, _pack = pack }, Loader)
  return self
end

--- The next batch: { step = k, indices = {...}, [i] or [name] = stream }
--- where a dense stream is one string of batch_size * record_size bytes and
--- a ragged stream a table of {shape = {...}, data = "..."} records; nil
--- once a finite pass is over. In an even_batches pass, valid = the
--- number of leading rows that are real records when padding rows follow.
--- In mode "pack": every stream one string of rows * pack_length items,
--- segment_ids, positions, seq_lens and cu_seqlens strings of
--- little-endian int32, indices the document of each segment, and pack =
--- {rows, length, segments, max_segments, max_seqlen, tokens}.
function Loader:next()
  local h = rawget(self, "_h")
  if h == nil then fail("ECLOSED", "loader is closed") end
  local names = self._names
  if names == nil then return raw.loader_next(h, self._dtypes) end
  local ok, b = pcall(raw.loader_next, h, self._dtypes)
  if not ok then error(rename_streams(names, b), 0) end
  if b == nil then return nil end
  for i, name in ipairs(names) do b[name] = b[i]; b[i] = nil end
  return b
end

--- A finite pass's number of steps on this rank (nil for an endless loader).
function Loader:steps()
  local h = rawget(self, "_h")
  if h == nil then fail("ECLOSED", "loader is closed") end
  local n = raw.zld_steps(h)
  if n == -1 then return nil end -- UINT64_MAX: endless
  return n
end

--- The step the next call to next() returns.
function Loader:step()
  local h = rawget(self, "_h")
  if h == nil then fail("ECLOSED", "loader is closed") end
  return raw.zld_next_step(h)
end

--- The options that resume this loader exactly (start_step = the next
--- step, flip = the loader's flips): pass them to zrecord.loader over the
--- same streams.
function Loader:state()
  local h = rawget(self, "_h")
  if h == nil then fail("ECLOSED", "loader is closed") end
  if not raw.zld_get_state then fail("EUNSUPPORTED", "loader state is not in this build") end
  local st = raw.zld_get_state(h)
  if st.bucket_lengths then -- back to mode "bucket"
    st.mode, st.lengths, st.window = "bucket", st.bucket_lengths, st.bucket_window
    st.bucket_lengths, st.bucket_window = nil, nil
  end
  if st.pack then st.mode, st.pack = "pack", nil end
  -- a mixture loader walks its virtual index space sequentially; its
  -- state keeps the mode its sources default to
  if rawget(self, "_mix_mode") then st.mode = self._mix_mode end
  local flips = st.flip -- the raw list: back to {key = p}
  st.flip = nil
  if flips then
    st.flip = {}
    for _, f in ipairs(flips) do
      st.flip[self._names and self._names[f.stream + 1] or f.stream] = f.p
    end
  end
  return st
end

--- Which records of step `step`'s batch the flip of stream `key` (as
--- given in flip =) flips: a table of batch_size booleans (a pure
--- function of seed, step and rank: any step, past or future). EINVAL for
--- a stream without a flip.
function Loader:flipped(key, step)
  local h = rawget(self, "_h")
  if h == nil then fail("ECLOSED", "loader is closed") end
  if math.type(step) ~= "integer" or step < 0 then
    fail("EINVAL", "flipped: step must be a non-negative integer, got %s", tostring(step))
  end
  for _, f in ipairs(self._flips) do
    if f.key == key then
      return raw.flip_mask(h, step, f.p, raw.zld_get_state(h).batch_size)
    end
  end
  local q = {}
  for k, f in ipairs(self._flips) do q[k] = tostring(f.key) end
  fail("EINVAL", "flipped: stream %s has no flip (flip = {%s})", tostring(key), table.concat(q, ", "))
end

--- One finite pass over the streams (every record exactly once, then
--- next() returns nil): zrecord.loader with pass = true. options:
--- batch_size, shuffle (false: index order; true: a permutation keyed by
--- seed and epoch), seed, epoch, drop_last (drop the incomplete last global
--- batch), rank, world_size (each rank its own records: the last global
--- batch split as evenly as possible, no record repeated), even_batches
--- (every rank the same number of full batches; padding rows repeat a
--- record and batch.valid counts the real ones), start_step, num_workers,
--- prefetch, readahead, and mode = "pack" with pack_length etc. for a pass
--- of packed rows. loader:steps() is this rank's number of steps.
function M.pass_loader(streams, options)
  if options ~= nil and type(options) ~= "table" then
    fail("EINVAL", "pass_loader: options must be a table, got %s", type(options))
  end
  local opts = { pass = true }
  for k, v in pairs(options or {}) do opts[k] = v end
  return M.loader(streams, opts)
end

--- Iterate: for batch in loader:batches() do ... end (endless, or to the
--- end of a finite pass).
function Loader:batches() return function() return self:next() end end

function Loader:close()
  local h = rawget(self, "_h")
  if h == nil then return end
  self._h = nil
  raw.zld_close(h)
  if rawget(self, "_mixture") then raw.zld_mixture_free(self._mixture) end
end

--- True once closed, or once a store (concatenation, mixture) it reads
--- was closed: next() then fails with ECLOSED naming it.
function Loader:closed()
  local h = rawget(self, "_h")
  return h == nil or raw.zld_is_closed(h)
end

Loader.__close = function(self) self:close() end
Loader.__gc = function(self) pcall(Loader.close, self) end

-- ------------------------------------------- molecular record collections

-- A collection of molecular records in one LMDB file (libzmrec). Frames
-- are plain tables, copied out of C on read and into C on write:
--   frame = {blocks = { blk, ... }, step =, time =, box =, meta =,
--            meta_types =, header = (read: the frame header, JSON text)}
--   blk   = {name =, count =, columns = { col, ... }, targets =,
--            attributes =, structural_shape = (JSON texts)}
--   col   = {name =, dtype = "f64" | "i32" | ..., shape = {rows, ...},
--            data = little-endian bytes (numeric), or strings = {...}
--            (a string column: row-major, a null entry is false),
--            valid = one byte 0/1 per row (or a table of booleans on
--            write; nil: every row valid), precision = p (f64)}
--   box   = {vectors = 9 numbers (row-major; the lattice vectors are its
--            columns), origin = 3 numbers, periodic = 3 booleans,
--            cell_defined = boolean}
--   meta  = {key = value}: a boolean, integer, float or string; a table of
--           numbers / booleans for a vector tag; JSON text for tag "json".
--           meta_types = {key = tag} gives the tag (else: bool, i64, f64,
--           string by the value's type).
-- On read, frame.block[name] and block.column[name] look up by name.
local Collection = {}
Collection.__index = Collection

local function coll_handle(self)
  local h = rawget(self, "_h")
  if h == nil then fail("ECLOSED", "collection %s is closed", self.path) end
  return h
end

local function f64_bytes(t, n, what)
  if type(t) ~= "table" or #t ~= n then
    fail("EINVAL", "%s must be a table of %d numbers, got %s", what, n, type(t) == "table" and #t or type(t))
  end
  return string.pack("<" .. string.rep("d", n), table.unpack(t, 1, n))
end

-- A C frame (zmr_frame *) as a table; frees it.
local function frame_table(f)
  local ok, t = pcall(function()
    local fr = { blocks = {}, block = {}, header = raw.zr_bind_mrec_frame_header(f) }
    local flags = raw.zr_bind_mrec_frame_flags(f)
    if flags & 1 ~= 0 then fr.step = raw.zr_bind_mrec_frame_step(f) end
    if flags & 2 ~= 0 then fr.time = raw.zr_bind_mrec_frame_time(f) end
    if flags & 4 ~= 0 then
      local buf = raw.buffer(96)
      raw.zr_bind_mrec_frame_box(f, buf)
      local v = { string.unpack("<" .. string.rep("d", 12), buf:tostring()) }
      fr.box = { vectors = { table.unpack(v, 1, 9) }, origin = { v[10], v[11], v[12] },
                 periodic = { flags & 16 ~= 0, flags & 32 ~= 0, flags & 64 ~= 0 },
                 cell_defined = flags & 8 ~= 0 }
    end
    for b = 0, raw.zmr_frame_nblocks(f) - 1 do
      local blk = { name = raw.zmr_frame_block_name(f, b), count = raw.zmr_frame_block_count(f, b),
                    columns = {}, column = {} }
      for c = 0, raw.zmr_frame_ncolumns(f, b) - 1 do
        raw.zr_bind_mrec_column_check(f, b, c)
        local col = { name = raw.zr_bind_mrec_column_name(f, b, c),
                      dtype = raw.zr_bind_mrec_column_dtype(f, b, c), shape = {} }
        for k = 0, raw.zr_bind_mrec_column_ndim(f, b, c) - 1 do
          col.shape[k + 1] = raw.zr_bind_mrec_column_dim(f, b, c, k)
        end
        if col.dtype == "string" then
          col.strings = {}
          for k = 0, raw.zr_bind_mrec_column_nelem(f, b, c) - 1 do
            col.strings[k + 1] = raw.zr_bind_mrec_column_string(f, b, c, k) or false
          end
        else
          local n = raw.zr_bind_mrec_column_nbytes(f, b, c)
          if n == 0 then
            col.data = ""
          else
            local buf = raw.buffer(n)
            raw.zr_bind_mrec_column_copy(f, b, c, buf)
            col.data = buf:tostring()
          end
        end
        local nv = raw.zr_bind_mrec_column_nvalid(f, b, c)
        if nv > 0 then
          local buf = raw.buffer(nv)
          raw.zr_bind_mrec_column_validity(f, b, c, buf)
          col.valid = buf:tostring()
        end
        local p = raw.zr_bind_mrec_column_precision(f, b, c)
        if p ~= 0 then col.precision = p end
        blk.columns[#blk.columns + 1] = col
        blk.column[col.name] = col
      end
      fr.blocks[#fr.blocks + 1] = blk
      fr.block[blk.name] = blk
    end
    return fr
  end)
  raw.zmr_frame_free(f)
  if not ok then error(t, 0) end
  return t
end

local function record_index(self, rec)
  if math.type(rec) ~= "integer" then
    fail("EINVAL", "record index must be an integer, got %s", type(rec))
  end
  if rec < 0 then rec = rec + raw.zmr_n_records(coll_handle(self)) end
  if rec < 0 then fail("ERANGE", "%s: record %d out of range", self.path, rec) end
  return rec
end

--- Open a collection read-only. opts.nolock = true: no lock file (read-only
--- media; no writer may run). EIO for a missing path, ENOTSTORE for a file
--- that is not a collection, ECORRUPT for a damaged one.
function M.open_collection(path, opts)
  check_path(path)
  if opts ~= nil and type(opts) ~= "table" then
    fail("EINVAL", "open_collection: options must be a table, got %s", type(opts))
  end
  local flags = (opts and opts.nolock) and raw.ZMR_OPEN_NOLOCK or 0
  return setmetatable({ _h = raw.zmr_open(path, flags), path = path }, Collection)
end

--- Check every rule of the layout over a whole collection file (opts.nolock
--- as in open_collection); raises the first broken rule, naming the file.
function M.validate_collection(path, opts)
  check_path(path)
  raw.zmr_validate(path, (opts and opts.nolock) and raw.ZMR_OPEN_NOLOCK or 0)
end

--- The layout's precision rule on one float (ties to even), as the writer
--- applies it to a column with a declared precision.
function M.round_precision(x, precision) return raw.zmr_round_precision(x, precision) end

--- Number of records.
function Collection:len() return raw.zmr_n_records(coll_handle(self)) end
Collection.__len = Collection.len
--- Number of trajectory frames over every record.
function Collection:n_frames() return raw.zmr_n_frames(coll_handle(self)) end
--- collection.molrec_version (1 or 2), 0 when the file does not state it.
function Collection:molrec_version() return raw.zmr_molrec_version(coll_handle(self)) end
--- The collection document (JSON text).
function Collection:meta_json() return raw.zmr_meta_json(coll_handle(self)) end
--- Record rec's meta document (JSON text).
function Collection:record_meta(rec)
  local h, r = coll_handle(self), record_index(self, rec)
  local buf = raw.buffer(512)
  local n = raw.zr_bind_mrec_record_meta(h, r, buf)
  if n > buf:size() then
    buf = raw.buffer(n)
    n = raw.zr_bind_mrec_record_meta(h, r, buf)
  end
  return buf:tostring():sub(1, n)
end
--- Record rec's index row: {first_frame =, n_frames =, n_atoms =,
--- has_trajectory =}.
function Collection:record_info(rec)
  local ff, nf, na, tr = raw.zr_bind_mrec_record_info(coll_handle(self), record_index(self, rec))
  return { first_frame = ff, n_frames = nf, n_atoms = na, has_trajectory = tr ~= 0 }
end

local function read_frame(self, which, rec, k)
  local f = raw.zr_bind_mrec_read(coll_handle(self), which, rec, k)
  if f == nil then return nil end
  return frame_table(f)
end
--- Record rec's system frame (nil when it has none).
function Collection:system(rec) return read_frame(self, "system", record_index(self, rec), 0) end
--- Trajectory frame k of record rec, every block carried forward.
function Collection:frame(rec, k) return read_frame(self, "frame", record_index(self, rec), k) end
--- Trajectory update k of record rec as stored (only the blocks that changed).
function Collection:update(rec, k) return read_frame(self, "update", record_index(self, rec), k) end
--- The force field frame (its document in .header's meta), nil when none.
function Collection:ff() return read_frame(self, "ff", 0, 0) end
--- The index frame: block "records", the collection's own index columns
--- and the binding's four (first_frame, n_frames, n_atoms, has_trajectory).
function Collection:index() return read_frame(self, "index", 0, 0) end
function Collection:closed() return rawget(self, "_h") == nil end
function Collection:close()
  local h = rawget(self, "_h")
  if h == nil then return end
  self._h = nil
  raw.zmr_close(h)
end
Collection.__close = function(self) self:close() end
Collection.__gc = function(self) pcall(Collection.close, self) end

local CollectionWriter = {}
CollectionWriter.__index = CollectionWriter

-- Meta values go to C as binary values (C writes the typed JSON, the same
-- text from every language), strings as text, tag "json" as JSON text.
local function set_meta(f, key, value, tag)
  local tv = type(value)
  if tag == nil then
    tag = tv == "boolean" and "bool" or tv == "string" and "string"
      or math.type(value) == "integer" and "i64" or math.type(value) == "float" and "f64" or nil
    if tag == nil then fail("EINVAL", "meta %s: a %s value needs a tag in meta_types", key, tv) end
  end
  if tag == "string" or tag == "json" then
    if tv ~= "string" then fail("EINVAL", "meta %s: tag %s needs a string, got %s", key, tag, tv) end
    if tag == "string" then return raw.zr_bind_mrec_set_meta_text(f, key, value) end
    return raw.zr_bind_mrec_set_meta(f, key, tag, value)
  end
  local vals = tv == "table" and value or { value }
  local fmt = tag:sub(1, 1) == "b" and "B" or tag:sub(1, 1) == "f" and "d" or "j"
  local parts = {}
  for i, x in ipairs(vals) do
    if type(x) == "boolean" then x = x and 1 or 0 end
    if type(x) ~= "number" then fail("EINVAL", "meta %s: element %d of a %s value is a %s", key, i, tag, type(x)) end
    local ok, b = pcall(string.pack, "<" .. fmt, x)
    if not ok then fail("EINVAL", "meta %s: element %d (%s) is not a %s value", key, i, tostring(x), tag) end
    parts[i] = b
  end
  raw.zr_bind_mrec_set_meta_values(f, key, tag, table.concat(parts))
end

local function mask_bytes(v, what)
  if v == nil or type(v) == "string" then return v end
  if type(v) ~= "table" then fail("EINVAL", "%s: valid must be bytes or a table of booleans, got %s", what, type(v)) end
  local b = {}
  for i, x in ipairs(v) do b[i] = x and "\1" or "\0" end
  return table.concat(b)
end

local function string_bytes(strings, what)
  if type(strings) ~= "table" then fail("EINVAL", "%s: strings must be a table, got %s", what, type(strings)) end
  local parts = {}
  for i = 1, #strings do
    local s = strings[i]
    if s == false then
      parts[i] = string.pack("<I4", 0xFFFFFFFF)
    elseif type(s) == "string" then
      parts[i] = string.pack("<s4", s)
    else
      fail("EINVAL", "%s: string entry %d must be a string or false (null), got %s", what, i, type(s))
    end
  end
  return table.concat(parts)
end

-- A C frame of `kind` ("system", "update", "index", "ff") from a frame
-- table; the caller frees it.
local function c_frame(kind, t)
  if type(t) ~= "table" then fail("EINVAL", "%s frame must be a table, got %s", kind, type(t)) end
  local f = raw.zr_bind_mrec_frame_create(kind)
  local ok, err = pcall(function()
    if t.step ~= nil then raw.zmr_frame_set_step(f, t.step) end
    if t.time ~= nil then raw.zmr_frame_set_time(f, t.time) end
    if t.box ~= nil then
      local bx = t.box
      local vb = f64_bytes(bx.vectors, 9, "box.vectors")
      local ob = f64_bytes(bx.origin or { 0.0, 0.0, 0.0 }, 3, "box.origin")
      local per = 0
      for k, p in ipairs(bx.periodic or {}) do if p then per = per | (1 << (k - 1)) end end
      raw.zr_bind_mrec_set_box(f, vb .. ob, per, bx.cell_defined == false and 0 or 1)
    end
    for _, blk in ipairs(t.blocks or {}) do
      raw.zmr_frame_add_block(f, blk.name, blk.count)
      for _, field in ipairs({ "structural_shape", "targets", "attributes" }) do
        if blk[field] ~= nil then raw.zmr_frame_set_block_json(f, blk.name, field, blk[field]) end
      end
      for _, col in ipairs(blk.columns or {}) do
        local what = "column " .. tostring(blk.name) .. "/" .. tostring(col.name)
        local valid = mask_bytes(col.valid, what)
        if col.dtype == "string" then
          raw.zr_bind_mrec_add_string_column(f, blk.name, col.name, col.shape,
                                             string_bytes(col.strings, what), valid)
        else
          raw.zr_bind_mrec_add_column(f, blk.name, col.name, col.dtype, col.shape, col.data, valid,
                                      col.precision or 0.0)
        end
      end
    end
    if kind == "ff" then
      if t.document ~= nil then raw.zmr_frame_set_meta_document(f, t.document) end
    else
      local keys = {}
      for k in pairs(t.meta or {}) do keys[#keys + 1] = k end
      table.sort(keys)
      for _, k in ipairs(keys) do set_meta(f, k, t.meta[k], (t.meta_types or {})[k]) end
    end
  end)
  if not ok then raw.zmr_frame_free(f); error(err, 0) end
  return f
end

local function writer_handle(self)
  local h = rawget(self, "_h")
  if h == nil then fail("ECLOSED", "collection writer %s is closed", self.path) end
  return h
end

-- Run call(h, f) with a C frame built from t, freeing the frame after.
local function with_frame(self, kind, t, call)
  local h = writer_handle(self)
  local f = c_frame(kind, t)
  local ok, err = pcall(call, h, f)
  raw.zmr_frame_free(f)
  if not ok then error(err, 0) end
end

--- Create a collection at path (EEXIST if it exists). opts.collection:
--- the collection document (JSON text), opts.schema: the sequence schema
--- (JSON text). Nothing is a collection until :commit().
function M.create_collection(path, opts)
  check_path(path)
  opts = opts or {}
  return setmetatable({ _h = raw.zmr_writer_create(path, opts.collection, opts.schema), path = path },
                      CollectionWriter)
end

--- The force field, at most once: document its JSON text (an object),
--- blocks optional frame blocks.
function CollectionWriter:set_ff(document, blocks)
  with_frame(self, "ff", { document = document, blocks = blocks }, raw.zmr_writer_set_ff)
end

--- Start the next record: meta its meta document (JSON text or nil),
--- system a frame table or nil.
function CollectionWriter:begin_record(meta, system)
  local h = writer_handle(self)
  if system == nil then return raw.zr_bind_mrec_begin_record(h, meta, nil) end
  with_frame(self, "system", system, function(w, f) raw.zr_bind_mrec_begin_record(w, meta, f) end)
end

--- The current record has a trajectory, also when no frame follows.
function CollectionWriter:begin_trajectory() raw.zmr_writer_begin_trajectory(writer_handle(self)) end

--- Append a trajectory frame (a frame table, with .step optional) to the
--- current record.
function CollectionWriter:add_frame(frame)
  with_frame(self, "update", frame, raw.zmr_writer_add_frame)
end

--- The collection's own index columns: a block table (name "records", one
--- row per record, checked at commit).
function CollectionWriter:set_index(block)
  if type(block) ~= "table" then fail("EINVAL", "set_index: block must be a table, got %s", type(block)) end
  local b = setmetatable({ name = "records" }, { __index = block })
  with_frame(self, "index", { blocks = { b } }, raw.zmr_writer_set_index)
end

--- Write the index and the collection document, and close.
function CollectionWriter:commit()
  local h = writer_handle(self)
  self._h = nil
  raw.zmr_writer_commit(h)
end

--- Close without committing (the file is not a collection).
function CollectionWriter:abort()
  local h = rawget(self, "_h")
  if h == nil then return end
  self._h = nil
  raw.zmr_writer_abort(h)
end
CollectionWriter.__close = function(self) self:abort() end
CollectionWriter.__gc = function(self) pcall(CollectionWriter.abort, self) end

-- ------------------------------------------- collections as loader streams

-- A collection read straight from LMDB as loader streams (libzmrec's item
-- source through zr_bind_mrec.h): one source per call, shared by its
-- streams; closing any stream closes the source and the loaders reading it.
local MrecStream = {}
MrecStream.__index = MrecStream
MrecStream.__name = "zrecord.mrec_stream"
M.MrecStream = MrecStream

local MrecSource = {}
MrecSource.__index = MrecSource

function MrecSource:close()
  local h = rawget(self, "_h")
  if h == nil then return end
  -- a loader reading the source holds it in C until it is closed itself
  self._h = nil
  raw.zr_bind_mrec_source_free(h)
end
MrecSource.__gc = function(self) pcall(MrecSource.close, self) end

local function mrec_source(path, opts, what)
  check_path(path)
  if opts ~= nil and type(opts) ~= "table" then
    fail("EINVAL", "%s: options must be a table, got %s", what, type(opts))
  end
  opts = opts or {}
  local known = { block = true, column = true, scalars = true, include_systems = true, nolock = true,
                  codec = true }
  for k in pairs(opts) do
    if not known[k] or (k == "codec" and what ~= "mrec_to_stores") then
      fail("EINVAL", "%s: unknown option '%s'", what, tostring(k))
    end
  end
  local column = opts.column or { "x", "y", "z" }
  if type(column) == "table" then column = table.concat(column, ",") end
  local scalars = opts.scalars or { "step", "pe" }
  local set = raw.zr_bind_set_new()
  local ok, h = pcall(function()
    for _, name in ipairs(scalars) do raw.zr_bind_set_add_path(set, tostring(name)) end
    return raw.zr_bind_mrec_source_open(path, opts.nolock and raw.ZMR_OPEN_NOLOCK or 0, opts.block or "atoms",
                                        column, set, opts.include_systems == false and 0 or 1)
  end)
  raw.zr_bind_set_free(set)
  if not ok then error(h, 0) end
  return setmetatable({ _h = h, path = path }, MrecSource)
end

--- A collection as loader streams read directly from LMDB, no conversion:
--- {positions = ragged f64 (one (n_atoms, 3) record per frame), record =
--- dense u64, step = dense i64 (-1 for none), <other scalar> = dense f64
--- (NaN for none)}, item for item the stores mrec_to_stores writes, so a
--- loader with the same seed gives the same batches over either. opts:
--- block ("atoms"), column ({"x", "y", "z"} or one name), scalars ({"step",
--- "pe"}), include_systems (true), nolock. A stream has len(), kind,
--- dtype, closed() and close() (closes every stream of the call; a loader
--- reading them keeps the source until it is closed itself, and its next
--- batch fails with ECLOSED naming the collection). EINVAL for a
--- collection of no items.
function M.mrec_streams(path, opts)
  local src = mrec_source(path, opts, "mrec_streams")
  local n = raw.zr_bind_mrec_source_length(src._h)
  if n == 0 then
    src:close()
    fail("EINVAL", "mrec_streams: %s: no frames (and no system holding the column) to stream", path)
  end
  local out = {}
  for k = 0, raw.zr_bind_mrec_source_nstreams(src._h) - 1 do
    local dt = raw.zr_bind_mrec_source_stream_dtype(src._h, k)
    local st = setmetatable({ _source = src, _which = k,
                              name = raw.zr_bind_mrec_source_stream_name(src._h, k),
                              kind = k == 0 and "ragged" or "dense",
                              dtype = ({ f64 = "<f8", u64 = "<u8", i64 = "<i8" })[dt] }, MrecStream)
    out[st.name] = st
  end
  return out
end

function MrecStream:len()
  local h = rawget(self._source, "_h")
  if h == nil then fail("ECLOSED", "mrec stream %s of %s is closed", self.name, self._source.path) end
  return raw.zr_bind_mrec_source_length(h)
end
function MrecStream:closed() return rawget(self._source, "_h") == nil end
function MrecStream:close() self._source:close() end
MrecStream.__len = function(self) return self:len() end

--- Convert a collection into stores under out_dir (made if missing):
--- positions (ragged f64), record (dense u64) and one dense store per
--- scalar, the items mrec_streams reads; opts as there plus codec ("zstd",
--- "raw" or "auto"). Returns {name = open store}. The stores are written
--- under <name>.partial and renamed only once all are complete: on an error
--- (a missing column, an unwritable directory) none is at its name.
function M.mrec_to_stores(path, out_dir, opts)
  check_path(out_dir)
  local src = mrec_source(path, opts, "mrec_to_stores")
  local ok, err = pcall(raw.zr_bind_mrec_to_stores, src._h, out_dir, (opts and opts.codec) or "zstd")
  local names = {}
  for k = 0, raw.zr_bind_mrec_source_nstreams(src._h) - 1 do
    names[#names + 1] = raw.zr_bind_mrec_source_stream_name(src._h, k)
  end
  src:close()
  if not ok then error(err, 0) end
  local out = {}
  for _, name in ipairs(names) do out[name] = M.open(out_dir .. "/" .. name) end
  return out
end

return M
