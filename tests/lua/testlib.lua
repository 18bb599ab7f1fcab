-- testlib.lua - a minimal test runner for the zrecord Lua tests.
-- Each test file: local T = require "testlib"; T.test("name", fn) ...;
-- T.run() (exits 1 if any test failed). Run one test: ZR_LUA_TEST=name.
local T = { tests = {} }

function T.test(name, fn) T.tests[#T.tests + 1] = { name = name, fn = fn } end

function T.eq(got, want, what)
  if got ~= want then
    error(string.format("%s: got %s (%s), want %s (%s)", what or "value",
      tostring(got), math.type(got) or type(got), tostring(want), math.type(want) or type(want)), 2)
  end
end

function T.ok(cond, what) if not cond then error((what or "condition") .. " is false", 2) end end

-- Call fn(...) and check it raises an error whose text matches `pattern`.
function T.raises(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then error("expected an error matching '" .. pattern .. "', got success", 2) end
  if type(err) ~= "string" or not err:find(pattern) then
    error("error '" .. tostring(err) .. "' does not match '" .. pattern .. "'", 2)
  end
  return err
end

-- Remove directory `dir` with everything in it, and make it again when
-- `make` (through the shell: cmd.exe on Windows, where Lua runs under wine
-- in the cross builds).
local windows = package.config:sub(1, 1) == "\\"
local function reset_dir(dir, make)
  if windows then
    local d = '"' .. dir:gsub("/", "\\") .. '"'
    os.execute("if exist " .. d .. " rmdir /s /q " .. d)
    if make then os.execute("mkdir " .. d) end
  else
    os.execute("rm -rf '" .. dir .. "'" .. (make and " && mkdir -p '" .. dir .. "'" or ""))
  end
end

local counter = 0
-- A fresh, not yet existing path under ZR_TEST_TMPDIR (or /tmp).
function T.path(name)
  local base = os.getenv("ZR_TEST_TMPDIR") or "/tmp"
  if not T.root then
    T.root = string.format("%s/lua-%s-%d", base, (arg and arg[0] or "t"):match("([^/\\]*)%.lua$") or "t",
                           os.time() % 100000 + math.random(0, 99999))
    reset_dir(T.root, true)
  end
  counter = counter + 1
  return string.format("%s/%s-%d", T.root, name or "s", counter)
end

function T.run()
  local only = os.getenv("ZR_LUA_TEST")
  local failed, ran = 0, 0
  for _, t in ipairs(T.tests) do
    if not only or only == t.name then
      ran = ran + 1
      local ok, err = xpcall(t.fn, debug.traceback)
      collectgarbage()
      if ok then
        print("ok     " .. t.name)
      else
        failed = failed + 1
        print("FAILED " .. t.name .. "\n" .. tostring(err))
      end
    end
  end
  if T.root then reset_dir(T.root, false) end
  print(string.format("%d/%d passed", ran - failed, ran))
  os.exit(failed == 0 and 0 or 1)
end

return T
