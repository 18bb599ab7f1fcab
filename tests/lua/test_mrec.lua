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

-- Every kind of content the layout holds: string columns with a null entry,
-- validity masks, precision, a box, typed meta, block fields, step and
-- time, a force field, the collection's own index columns and a record
-- whose trajectory has zero frames (tests/cross/run.sh checks the bytes
-- against Python's writer).
local SCHEMA = '{"blocks":{"coords":{"columns":{"pos":{"dtype":"f64","trailing":[3]}}}},'
  .. '"meta":{"energy":{"dtype":"f64","fill":0.0}}}'
local BOX = { vectors = { 10.0, 0, 0, 0, 11.0, 0, 0, 0, 12.0 }, origin = { 0.5, 0.0, -0.5 },
              periodic = { true, true, false }, cell_defined = true }

local function write_full(path)
  local w = zr.create_collection(path, { collection = '{"units":{"length":"angstrom"}}', schema = SCHEMA })
  w:set_ff('{"kind":"lj","eps":0.5}')
  w:begin_record('{"name":"water"}', {
    meta = { cell3 = { 1.0, 2.0, 3.0 }, charge = 0, label = "w\u{e4}ter", big = 2 ^ 60 },
    meta_types = { cell3 = "f64x3", big = "u64" }, box = BOX,
    blocks = { { name = "atoms", count = 3, attributes = '{"note":"water"}', columns = {
      { name = "element", dtype = "string", shape = { 3 }, strings = { "O", "H", "H" } },
      { name = "tag", dtype = "string", shape = { 3 }, strings = { "a", 'b"\\', false }, valid = "\1\1\0" },
      { name = "x", dtype = "f64", shape = { 3 }, data = f64s(0.1, -1.25, 3.0), precision = 2.0 ^ -10 },
      { name = "charge", dtype = "f64", shape = { 3 }, data = f64s(-0.8, 0.4, 0.4), valid = { true, false, true } },
    } } } })
  for k = 0, 1 do
    w:add_frame({ step = 10 * (k + 1), time = 0.5 * (k + 1), meta = { energy = -1.5 * (k + 1) },
                  blocks = { { name = "coords", count = 3, columns = {
                    { name = "pos", dtype = "f64", shape = { 3, 3 }, data = coords(k) } } } } })
  end
  w:begin_record('{"i":1}')
  w:begin_trajectory()
  w:set_index({ count = 2, columns = { { name = "weight", dtype = "f64", shape = { 2 }, data = f64s(1.0, 2.0) } } })
  w:commit()
  return path
end

T.test("every_kind_of_content_round_trips", function()
  local path = write_full(T.path("full") .. ".mrec.lmdb")
  zr.validate_collection(path)
  local c <close> = zr.open_collection(path)
  T.eq(c:molrec_version(), 2, "molrec_version")
  local s = c:system(0)
  local atoms = s.block.atoms
  T.eq(atoms.column.element.strings[2], "H", "string entry")
  T.eq(atoms.column.tag.strings[2], 'b"\\', "quote and backslash kept")
  T.eq(atoms.column.tag.strings[3], false, "null entry")
  T.eq(atoms.column.tag.valid, "\1\1\0", "string column mask")
  T.eq(atoms.column.charge.valid, "\1\0\1", "mask from booleans")
  T.eq(atoms.column.charge.data, f64s(-0.8, 0.4, 0.4), "masked column keeps its bytes")
  T.eq(atoms.column.x.precision, 2.0 ^ -10, "precision")
  T.eq(atoms.column.x.data, f64s(0.099609375, -1.25, 3.0), "x on the precision grid")
  T.eq(zr.round_precision(0.1, 2.0 ^ -10), 0.099609375, "the same rule by hand")
  T.eq(atoms.column.element.valid, nil, "no mask")
  T.eq(s.box.vectors[5], 11.0, "box vectors")
  T.eq(s.box.origin[3], -0.5, "box origin")
  T.ok(s.box.periodic[1] and s.box.periodic[2] and not s.box.periodic[3], "periodic axes")
  T.ok(s.box.cell_defined, "cell_defined")
  T.ok(s.header:find('"cell3":[1.0,2.0,3.0]', 1, true), "vector meta typed as Python writes it")
  T.ok(s.header:find('"big":"1152921504606846976"', 1, true), "u64 past 2^53 as a decimal string")
  T.ok(s.header:find('"label":"w\u{e4}ter"', 1, true), "string meta")
  T.ok(s.header:find('"attributes":{"note":"water"}', 1, true), "block attributes")
  local f = c:frame(0, 1)
  T.eq(f.step, 20, "step")
  T.eq(f.time, 1.0, "time")
  T.ok(f.header:find('"energy":-3.0', 1, true), "update meta")
  T.eq(f.block.coords.column.pos.data, coords(1), "resolved frame")
  T.eq(c:update(0, 1).block.coords.column.pos.data, coords(1), "stored update")
  T.ok(c:ff().header:find('"kind":"lj"', 1, true), "force field document")
  local idx = c:index().block.records
  T.eq(idx.column.weight.data, f64s(1.0, 2.0), "own index column")
  T.ok(idx.column.first_frame ~= nil, "binding's index columns")
  local info = c:record_info(1)
  T.eq(info.first_frame, 2, "record 1 first_frame")
  T.eq(info.n_frames, 0, "record 1 has no frames")
  T.ok(info.has_trajectory, "record 1 has a trajectory of zero frames")
  T.ok(not c:record_info(0).has_trajectory == false, "record 0 has a trajectory")
end)

local function one_column(w, col, count)
  w:begin_record(nil, { blocks = { { name = "atoms", count = count or 2, columns = { col } } } })
end

T.test("bad_content_gives_named_errors", function()
  local w <close> = zr.create_collection(T.path("bad") .. ".mrec.lmdb", { schema = SCHEMA })
  T.raises("^EINVAL: .*atoms/x", one_column, w, { name = "x", dtype = "f64", shape = { 2 }, data = f64s(1.0) })
  T.raises("^EINVAL: .*shape", one_column, w, { name = "x", dtype = "f64", shape = { 3 }, data = f64s(1, 2, 3) })
  T.raises("^EINVAL: .*f32", one_column, w, { name = "x", dtype = "f32", shape = { 2 }, data = "abcdefgh" })
  T.raises("^EINVAL: .*atoms/s: entry 1 is not UTF%-8 text", one_column, w,
           { name = "s", dtype = "string", shape = { 2 }, strings = { "ok", "\xff" } })
  T.raises("^EINVAL: .*atoms/s: entry 1 is not UTF%-8 text", one_column, w,
           { name = "s", dtype = "string", shape = { 2 }, strings = { "ok", "a\0b" } })
  T.raises("^EINVAL: .*bytes left after the 2 strings", one_column, w,
           { name = "s", dtype = "string", shape = { 2 }, strings = { "a", "b", "c" } })
  T.raises("^EINVAL: .*string entry 2", one_column, w,
           { name = "s", dtype = "string", shape = { 2 }, strings = { "a", 7 } })
  T.raises("^EINVAL: .*validity has 3 bytes, the column has 2 rows", one_column, w,
           { name = "x", dtype = "f64", shape = { 2 }, data = f64s(1, 2), valid = "\1\1\1" })
  T.raises("^EINVAL: .*validity byte 1 is 2", one_column, w,
           { name = "x", dtype = "f64", shape = { 2 }, data = f64s(1, 2), valid = "\1\2" })
  T.raises("^EINVAL: .*box", function()
    w:begin_record(nil, { box = { vectors = { 1, 2, 3 } }, blocks = {} })
  end)
  T.raises("^EINVAL: .*cell3", function()
    w:begin_record(nil, { meta = { cell3 = { 1.0, 2.0 } }, meta_types = { cell3 = "f64x3" }, blocks = {} })
  end)
  T.raises("^EINVAL: .*meta n: a table value needs a tag", function()
    w:begin_record(nil, { meta = { n = { 1 } }, blocks = {} })
  end)
  T.raises("^EINVAL: .*not UTF%-8", function()
    w:begin_record(nil, { meta = { label = "\xc3" }, blocks = {} })
  end)
  T.raises("^EINVAL: set_index: block must be a table", function() w:set_index("x") end)
  -- an update whose meta key the schema does not declare
  w:begin_record(nil, { blocks = { { name = "atoms", count = 1, columns = {
    { name = "x", dtype = "f64", shape = { 1 }, data = f64s(1.0) } } } } })
  T.raises("^EINVAL: .*meta key 'other' is not declared in sequence_schema.meta", function()
    w:add_frame({ meta = { other = 1.0 }, blocks = { { name = "coords", count = 1, columns = {
      { name = "pos", dtype = "f64", shape = { 1, 3 }, data = f64s(1, 2, 3) } } } } })
  end)
end)

T.test("validate_names_the_file", function()
  local p = T.path("v") .. ".mrec.lmdb"
  local w = zr.create_collection(p)
  one_column(w, { name = "x", dtype = "f64", shape = { 1 }, data = f64s(1.0) }, 1)
  w:abort() -- a writer aborted mid-way leaves no readable collection
  T.raises("^ENOTSTORE: .*v%-%d+%.mrec%.lmdb: key \"meta\" is missing: not a collection %(never committed%)", zr.validate_collection, p)
  T.raises("^ENOTSTORE: ", zr.open_collection, p)
  T.raises("^EIO: ", zr.validate_collection, T.path("nothing"))
  zr.validate_collection(write_collection(T.path("ok") .. ".mrec.lmdb"))
end)

-- ------------------------------------------- collections as loader streams

-- Six records of three frames (frame 1 carries frame 0's atoms forward,
-- frame 2 has no pe), then a system-only record holding x y z.
local function stream_collection(path)
  local w = zr.create_collection(path, { schema = '{"meta": {"pe": {"dtype": "f64", "fill": "NaN"}}}' })
  for r = 0, 5 do
    local n = 2 + r % 3
    w:begin_record(nil, nil)
    for k = 0, 2 do
      local fr = { step = 10 * r + k }
      if k ~= 2 then fr.meta = { pe = -1.0 * k - r }; fr.meta_types = { pe = "f64" } end
      if k ~= 1 then
        local cols = {}
        for j, c in ipairs({ "x", "y", "z" }) do
          local v = {}
          for a = 1, n do v[a] = r + k / 10 + j + a / 100 end
          cols[j] = { name = c, dtype = "f64", shape = { n }, data = f64s(table.unpack(v)) }
        end
        fr.blocks = { { name = "atoms", count = n, columns = cols } }
      end
      w:add_frame(fr)
    end
  end
  w:begin_record(nil, { meta = { pe = 2.5 }, blocks = { { name = "atoms", count = 2, columns = {
    { name = "x", dtype = "f64", shape = { 2 }, data = f64s(1, 2) },
    { name = "y", dtype = "f64", shape = { 2 }, data = f64s(3, 4) },
    { name = "z", dtype = "f64", shape = { 2 }, data = f64s(5, 6) } } } } })
  w:commit()
  return path
end

local function same_batch(a, b, what)
  T.eq(#a.indices, #b.indices, what .. " batch size")
  for i = 1, #a.indices do T.eq(a.indices[i], b.indices[i], what .. " index " .. i) end
  for _, name in ipairs({ "positions", "record", "step", "pe" }) do
    local x, y = a[name], b[name]
    if type(x) == "string" then
      T.eq(x, y, what .. " " .. name)
    else
      T.eq(#x, #y, what .. " " .. name .. " rows")
      for i = 1, #x do
        T.eq(x[i].data, y[i].data, what .. " " .. name .. " row " .. i)
        T.eq(table.concat(x[i].shape, ","), table.concat(y[i].shape, ","), what .. " shape " .. i)
      end
    end
  end
end

T.test("mrec_streams_give_the_batches_of_the_converted_stores", function()
  local path = stream_collection(T.path("s") .. ".mrec.lmdb")
  local streams = zr.mrec_streams(path)
  local stores = zr.mrec_to_stores(path, T.path("z"))
  T.eq(streams.positions:len(), 6 * 3 + 1, "items")
  T.eq(#stores.positions, 6 * 3 + 1, "converted items")
  T.eq(streams.step.dtype, "<i8", "step dtype")
  T.eq(stores.pe.dtype, "<f8", "pe store dtype")
  for _, opts in ipairs({ { batch_size = 5, seed = 11 }, { batch_size = 4, seed = 3, mode = "iid", num_workers = 2 } }) do
    local a <close> = zr.loader(streams, opts)
    local b <close> = zr.loader(stores, opts)
    for step = 1, 12 do same_batch(a:next(), b:next(), "step " .. step) end
  end
  -- the values: carry-forward, the fill, the system-only item
  local whole <close> = zr.loader(streams, { batch_size = 19, mode = "sequential" })
  local b = whole:next()
  T.eq(b.positions[2].data, b.positions[1].data, "frame 1 carries frame 0's atoms")
  T.eq(table.concat(b.positions[1].shape, ","), "2,3", "x y z side by side")
  local pe = { string.unpack("<" .. string.rep("d", 19), b.pe) }
  T.ok(pe[3] ~= pe[3], "frame 2 has no pe: NaN")
  T.eq(pe[19], 2.5, "the system's pe")
  T.eq(select(19, string.unpack("<" .. string.rep("i8", 19), b.step)), -1, "no step for a system")
  T.eq(select(19, string.unpack("<" .. string.rep("I8", 19), b.record)), 6, "the system's record")
  -- closing a stream closes every stream of the call; a loader reading
  -- them holds the source in C and stops with ECLOSED naming it
  local l = zr.loader(streams, { batch_size = 3 })
  l:next()
  streams.pe:close()
  T.ok(l:closed() and streams.positions:closed(), "closed together")
  for _ = 1, 3 do T.raises("^ECLOSED: .*mrec source '.*' was closed", l.next, l) end
  l:close()
  T.raises("^ECLOSED: ", zr.loader, streams, { batch_size = 3 })
  for _, s in pairs(stores) do s:close() end
end)

T.test("mrec_to_stores_failure_leaves_no_store", function()
  local path = stream_collection(T.path("f") .. ".mrec.lmdb")
  local out = T.path("out")
  T.raises("^ECORRUPT: .*atoms/q is missing", zr.mrec_to_stores, path, out, { column = { "x", "q" } })
  for _, name in ipairs({ "positions", "record", "positions.partial", "record.partial" }) do
    T.raises("^ENOTSTORE: .*does not exist", zr.open, out .. "/" .. name)
  end
  T.raises("^EINVAL: .*codec 'lz4'", zr.mrec_to_stores, path, out, { codec = "lz4" })
  local stores = zr.mrec_to_stores(path, out, { scalars = { "step" } })
  for _, s in pairs(stores) do s:close() end
  T.raises("^EEXIST: .*positions exists", zr.mrec_to_stores, path, out)
end)

T.run()
