-- The dictionary step of the cross-language test, Lua's side: read the
-- records of DIR/src (written by dict.py) and write DIR/lua, the
-- dictionary zr.train_dict makes of them (tier "fast").
local zr = require("zrecord")
local dir = arg[1]
local s = zr.open(dir .. "/src", { readonly = true })
local records = {}
for i = 0, s:len() - 1 do records[#records + 1] = s:get(i) end
s:close()
local f = assert(io.open(dir .. "/lua", "wb"))
f:write(zr.train_dict(records, "fast"))
f:close()
