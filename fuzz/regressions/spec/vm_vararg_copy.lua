-- Hang: `g(...)` copies every vararg in one VM instruction (OP_VARARG), in C
-- that the count hook does not see: 200k values per call, ~12M calls per
-- 50M-instruction budget. table.unpack is charged once for the values it
-- pushes; reusing them through `...` is not.
-- Expected: AT_ERR_SPEC (needs a time backstop or a patched VM).
local t = {} for i = 1, 200000 do t[i] = i end
local function g() end
local function f(...) for _ = 1, 1e9 do g(...) end end
f(table.unpack(t))
return { op = "gemv" }
