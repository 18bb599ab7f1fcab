-- Readers beside a writer, from Lua: a loader draws from the length its
-- streams had when it was made (the Python suite's
-- test_loader_length_fixed_at_creation).
local T = require "testlib"
local zr = require "zrecord"

local function ints(a, b)
  local t = {}
  for i = a, b - 1 do t[#t + 1] = string.pack("<i8", i) end
  return table.concat(t)
end

local function max_of(s)
  local m = -1
  for k = 1, #s, 8 do m = math.max(m, (string.unpack("<i8", s, k))) end
  return m
end

T.test("a loader's length is fixed when it is made", function()
  local p = T.path("l")
  local w <close> = zr.create_dense(p, "<i8", {})
  w:append(ints(0, 100))
  local r <close> = zr.open(p, { readonly = true })
  local lw = zr.loader({ w }, { batch_size = 16, mode = "iid", seed = 3, num_workers = 2 })
  local lr = zr.loader({ r }, { batch_size = 16, mode = "iid", seed = 3, num_workers = 2 })
  w:append(ints(1000, 1100))
  T.eq(r:refresh(), 200); T.eq(#w, 200)
  for _ = 1, 30 do
    T.ok(max_of(lw:next()[1]) < 100, "the writer's loader stays in the first 100 records")
    T.ok(max_of(lr:next()[1]) < 100, "the reader's loader stays in the first 100 records")
  end
  lw:close(); lr:close()
  local l <close> = zr.loader({ r }, { batch_size = 64, mode = "iid", seed = 3 })
  local m = -1
  for _ = 1, 10 do m = math.max(m, max_of(l:next()[1])) end
  T.ok(m >= 1000, "a new loader over the refreshed reader sees the appends")
end)

T.run()
