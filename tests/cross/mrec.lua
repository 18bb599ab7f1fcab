-- The mrec part of the cross-language test, Lua's side: writes the
-- collection tests/cross/mrec_write.py describes (the same content, through
-- zr.create_collection), which run.sh compares with Python's byte for byte.
--   lua5.4 mrec.lua OUT.mrec.lmdb
local zr = require "zrecord"

local function f64s(t) return string.pack("<" .. string.rep("d", #t), table.unpack(t)) end
local SCHEMA = '{"blocks":{"coords":{"columns":{"pos":{"dtype":"f64","trailing":[3]}}}},'
  .. '"meta":{"energy":{"dtype":"f64","fill":0.0}}}'

local function box(scale)
  return { vectors = { 10.0 * scale, 0, 0, 0, 11.0 * scale, 0, 0, 0, 12.0 * scale },
           origin = { 0.5, 0.0, -0.5 }, periodic = { true, true, false }, cell_defined = true }
end

local w = zr.create_collection(arg[1], { collection = '{"units":{"length":"angstrom"}}', schema = SCHEMA })
w:set_ff('{"kind":"lj","eps":0.5}')
w:begin_record('{"name":"water"}', {
  meta = { cell3 = { 1.0, 2.0, 3.0 }, charge = 0, label = "w\u{e4}ter" }, meta_types = { cell3 = "f64x3" },
  box = box(1.0),
  blocks = { { name = "atoms", count = 3, attributes = '{"note":"water"}', columns = {
    { name = "element", dtype = "string", shape = { 3 }, strings = { "O", "H", "H" } },
    { name = "tag", dtype = "string", shape = { 3 }, strings = { "a", "b\"\\\u{e9}", false }, valid = "\1\1\0" },
    { name = "x", dtype = "f64", shape = { 3 }, data = f64s({ 0.1, -1.25, 3.0 }), precision = 2.0 ^ -10 },
    { name = "charge", dtype = "f64", shape = { 3 }, data = f64s({ -0.8, 0.4, 0.4 }), valid = { true, false, true } },
  } } } })
for k = 0, 1 do
  local pos = {}
  for i = 0, 8 do pos[#pos + 1] = i + 10.0 * k end
  w:add_frame({ step = 10 * (k + 1), time = 0.5 * (k + 1), box = box(1.0 + k),
                meta = { energy = ({ -1.5, 0.0 / 0.0 })[k + 1] },
                blocks = { { name = "coords", count = 3, columns = {
                  { name = "pos", dtype = "f64", shape = { 3, 3 }, data = f64s(pos) } } } } })
end
w:begin_record('{"i":1}')
w:begin_trajectory()
w:set_index({ count = 2, columns = { { name = "weight", dtype = "f64", shape = { 2 }, data = f64s({ 1.0, 2.0 }) } } })
w:commit()
