-- Hang: Lua pattern matching runs in C, where the sandbox's count hook never
-- fires, so this never reaches the instruction limit (O(n^5) backtracking).
-- Expected: AT_ERR_SPEC "instruction limit" (or pattern functions refused).
local s = ("a"):rep(3000)
local hit = s:find(".-.-.-.-b")
return { op = "gemv" }
