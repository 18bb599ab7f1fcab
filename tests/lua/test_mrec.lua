-- Molecular record collections from Lua: a collection written through the
-- binding's writer, read back column by column with the same bytes, and
-- the named errors of a missing, a never committed, a junk and a truncated
-- file (the Python suite's test_mrec*.py cases).
local T = require "testlib"
local zr = require "zrecord"

local function f64s(...)
  local v = {}
  for _, x in ipairs({ ... }) do v[#v + 1] = string.pack("<d", x) end
  return table.concat(v)
end

local function i32s(...)
  local v = {}
  for _, x in ipairs({ ... }) do v[#v + 1] = string.pack("<i4", x) end
  return table.concat(v)
end

local X = f64s(0.5, -1.25, 3.0)
local Z = i32s(8, 1, 1, 2, 3, 4)
local function coords(k)
  local v = {}
  for i = 0, 8 do v[#v + 1] = 10.0 * k + i / 4 end
  return f64s(table.unpack(v))
end

-- Two records: a system of three atoms with a trajectory of two frames,
-- then a system alone.
local function write_collection(path)
  local w = zr.create_collection(path, { collection = '{"units": {"length": "angstrom"}}' })
  w:begin_record('{"name": "water", "charge": 0}', { blocks = {
    { name = "atoms", count = 3, columns = {
      { name = "x", dtype = "f64", shape = { 3 }, data = X },
      { name = "pairs", dtype = "i32", shape = { 3, 2 }, data = Z } } } } })
  for k = 0, 1 do
    w:add_frame({ step = 10 * (k + 1), blocks = {
      { name = "coords", count = 3, columns = {
        { name = "pos", dtype = "f64", shape = { 3, 3 }, data = coords(k) } } } } })
  end
  w:begin_record(nil, { blocks = { { name = "atoms", count = 1, columns = {
    { name = "x", dtype = "f64", shape = { 1 }, data = f64s(7.0) } } } } })
  w:commit()
  return path
end

T.test("write_then_read_back", function()
  local path = write_collection(T.path("c") .. ".mrec.lmdb")
  local c <close> = zr.open_collection(path)
  T.eq(#c, 2, "records")
  T.eq(c:n_frames(), 2, "frames")
  T.ok(c:meta_json():find('"angstrom"'), "collection document keeps the units")
  T.ok(c:record_meta(0):find('"water"'), "record 0's meta")
  local info = c:record_info(0)
  T.eq(info.n_frames, 2, "record 0 n_frames")
  T.eq(info.n_atoms, 3, "record 0 n_atoms")
  T.eq(c:record_info(1).n_frames, 0, "record 1 n_frames")

  local s = c:system(0)
  local atoms = s.block.atoms
  T.eq(atoms.count, 3, "atoms rows")
  T.eq(atoms.column.x.dtype, "f64", "x dtype")
  T.eq(#atoms.column.x.shape, 1, "x ndim")
  T.eq(atoms.column.x.data, X, "x bytes")
  T.eq(atoms.column.pairs.dtype, "i32", "pairs dtype")
  T.eq(atoms.column.pairs.shape[1], 3, "pairs rows")
  T.eq(atoms.column.pairs.shape[2], 2, "pairs trailing")
  T.eq(atoms.column.pairs.data, Z, "pairs bytes")
  T.eq(atoms.columns[1].name, "x", "column order")

  for k = 0, 1 do
    local f = c:frame(0, k)
    local r = f.block.coords.column.pos
    T.eq(r.data, coords(k), "frame " .. k .. " r bytes")
    T.eq(r.shape[2], 3, "r trailing")
  end
  T.eq(c:system(-1).block.atoms.column.x.data, f64s(7.0), "record -1 wraps to the last")
  T.raises("^ERANGE: ", function() return c:frame(0, 2) end)
  T.raises("^ERANGE: ", function() return c:system(2) end)
  c:close()
  T.ok(c:closed(), "closed")
  T.raises("^ECLOSED: ", function() return c:len() end)
end)

T.test("long_record_meta_reads_whole", function()
  local path = T.path("m") .. ".mrec.lmdb"
  local note = string.rep("abcdefghij", 100)
  local w = zr.create_collection(path)
  w:begin_record('{"note": "' .. note .. '"}', { blocks = { { name = "atoms", count = 1, columns = {
    { name = "x", dtype = "f64", shape = { 1 }, data = f64s(1.0) } } } } })
  w:commit()
  local c <close> = zr.open_collection(path)
  local m = c:record_meta(0)
  T.ok(#m > 1000, "meta longer than the first buffer")
  T.ok(m:find('"' .. note .. '"', 1, true), "the whole note")
  T.ok(m:sub(-1) == "}", "ends the document")
end)

T.test("create_refuses_an_existing_path", function()
  local path = write_collection(T.path("e") .. ".mrec.lmdb")
  T.raises("^EEXIST: ", zr.create_collection, path)
end)

T.test("writer_refuses_a_bad_column", function()
  local w <close> = zr.create_collection(T.path("b") .. ".mrec.lmdb")
  T.raises("^EINVAL: .*f32", function()
    w:begin_record(nil, { blocks = { { name = "atoms", count = 1, columns = {
      { name = "x", dtype = "f32", shape = { 1 }, data = "abcd" } } } } })
  end)
  T.raises("^EINVAL: ", function()
    w:begin_record(nil, { blocks = { { name = "atoms", count = 2, columns = {
      { name = "x", dtype = "f64", shape = { 2 }, data = f64s(1.0) } } } } })
  end)
end)

T.test("missing_file_is_EIO", function()
  T.raises("^EIO: .*nothing%-here", zr.open_collection, T.path("nothing-here"))
end)

T.test("uncommitted_and_junk_files_are_not_collections", function()
  local p = T.path("a") .. ".mrec.lmdb"
  local w = zr.create_collection(p)
  w:begin_record('{"i": 1}', { blocks = { { name = "atoms", count = 1, columns = {
    { name = "x", dtype = "f64", shape = { 1 }, data = f64s(1.0) } } } } })
  w:abort()
  T.raises("^ENOTSTORE: .*meta", zr.open_collection, p)
  local junk = T.path("junk")
  local fh = assert(io.open(junk, "wb"))
  fh:write(string.rep("\0", 8192))
  fh:close()
  T.raises("^ENOTSTORE: ", zr.open_collection, junk)
end)

T.test("truncated_copy_is_ECORRUPT", function()
  local src = write_collection(T.path("t") .. ".mrec.lmdb")
  local fh = assert(io.open(src, "rb"))
  local data = fh:read("a")
  fh:close()
  T.ok(#data > 8192, "collection larger than two pages")
  local cut = T.path("cut") .. ".mrec.lmdb"
  fh = assert(io.open(cut, "wb"))
  fh:write(data:sub(1, 8192 + 100))
  fh:close()
  T.raises("^ECORRUPT: .*file truncated: 8292 bytes", zr.open_collection, cut)
end)

T.run()
