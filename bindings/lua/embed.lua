-- embed.lua IN OUT: write the Lua source IN as a C byte array
-- `zr_lua_layer_source` (NUL-terminated) into the header OUT.
local src = assert(io.open(arg[1], "rb")):read("a")
local out = assert(io.open(arg[2], "wb"))
out:write("/* generated from zrecord.lua by embed.lua: do not edit */\n")
out:write("static const char zr_lua_layer_source[] = {\n")
for i = 1, #src, 16 do
  local chunk = { src:byte(i, math.min(i + 15, #src)) }
  out:write("  ", table.concat(chunk, ","), ",\n")
end
out:write("  0\n};\n")
out:close()
