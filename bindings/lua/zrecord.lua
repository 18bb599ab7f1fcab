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
--     scope, and on garbage collection, whichever comes first; closing a
--     store first closes any loader still reading it.

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
--- raw bytes) for codec {codec = "zstd_dict", dict = ...}; returns it as
--- a string. tier: "fast" (32 KiB dictionary, 4 MiB sample), "balanced"
--- (128 KiB, 16 MiB; the default) or "max" (1 MiB, 64 MiB), never a
--- number. Records past the tier's sample budget are thinned to an even
--- stride (every k-th record), so each tier costs about the same whatever
--- the data size. EINVAL for an unknown tier, a sample that is not a
--- string, or data zstd cannot train on (too little or too uniform).
function M.train_dict(samples, tier)
  if tier == nil then tier = "balanced" end
  local t = M.DICT_TIERS[tier]
  if type(tier) ~= "string" or t == nil then
    fail("EINVAL", "train_dict: unknown dictionary tier %s; expected 'fast', 'balanced' or 'max'",
         type(tier) == "string" and string.format("%q", tier) or tostring(tier))
  end
  if type(samples) ~= "table" then
    fail("EINVAL", "train_dict: samples must be a table of strings, got %s", type(samples))
  end
  local total = 0
  for k = 1, #samples do
    local r = samples[k]
    if type(r) ~= "string" then
      fail("EINVAL", "train_dict: sample %d must be a string, got %s", k - 1, type(r))
    end
    total = total + #r
  end
  local picked = samples
  if total > t.sample_bytes then
    local stride = (total + t.sample_bytes - 1) // t.sample_bytes
    picked = {}
    for k = 1, #samples, stride do picked[#picked + 1] = samples[k] end
  end
  return raw.train_dict(picked, t.dict_bytes)
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
    _loaders = setmetatable({}, { __mode = "k" }),
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

--- Sync, release the lock and the handle. Idempotent. Loaders still
--- reading this store are closed first.
function Store:close()
  local h = rawget(self, "_h")
  if h == nil then return end
  for l in pairs(self._loaders) do l:close() end
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
function M.loader(streams, options)
  if type(streams) ~= "table" then fail("EINVAL", "loader: streams must be a table of stores, got %s", type(streams)) end
  local list, names = {}, nil
  if #streams > 0 then
    for i, s in ipairs(streams) do list[i] = s end
  else
    names = {}
    for name in pairs(streams) do names[#names + 1] = name end
    table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
    for i, name in ipairs(names) do list[i] = streams[name] end
  end
  local handles, dtypes = {}, {}
  for i, s in ipairs(list) do
    if getmetatable(s) ~= Store then
      fail("EINVAL", "loader: %s is not a zrecord store, got %s", stream_label(names, i), type(s))
    end
    if rawget(s, "_h") == nil then
      fail("ECLOSED", "loader: %s: %s store %s is closed", stream_label(names, i), s.kind, s.path)
    end
    handles[i] = handle(s)
    dtypes[i] = raw.zrs_get_dtype(handles[i])
  end
  if options ~= nil and type(options) ~= "table" then
    fail("EINVAL", "loader: options must be a table, got %s", type(options))
  end
  local opts = {}
  for k, v in pairs(options or {}) do opts[k] = v end
  local flips = resolve_flips(opts, list, names, handles)
  local ok, h = pcall(raw.zld_create, handles, opts)
  if not ok then error(rename_streams(names, h), 0) end
  local self = setmetatable({ _h = h, _streams = list, _names = names, _dtypes = dtypes,
                              _flips = flips }, Loader)
  for _, s in ipairs(list) do s._loaders[self] = true end
  return self
end

--- The next batch: { step = k, indices = {...}, [i] or [name] = stream }
--- where a dense stream is one string of batch_size * record_size bytes and
--- a ragged stream a table of {shape = {...}, data = "..."} records.
function Loader:next()
  local h = rawget(self, "_h")
  if h == nil then fail("ECLOSED", "loader is closed") end
  local names = self._names
  if names == nil then return raw.loader_next(h, self._dtypes) end
  local ok, b = pcall(raw.loader_next, h, self._dtypes)
  if not ok then error(rename_streams(names, b), 0) end
  for i, name in ipairs(names) do b[name] = b[i]; b[i] = nil end
  return b
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

--- Iterate endlessly: for batch in loader:batches() do ... end
function Loader:batches() return function() return self:next() end end

function Loader:close()
  local h = rawget(self, "_h")
  if h == nil then return end
  self._h = nil
  raw.zld_close(h)
  for _, s in ipairs(self._streams) do
    if rawget(s, "_loaders") then s._loaders[self] = nil end
  end
end

Loader.__close = function(self) self:close() end
Loader.__gc = function(self) pcall(Loader.close, self) end

return M
