-- Hang: even a plain string.find is O(#s * #p) in C (memchr + memcmp per
-- candidate start), unseen by the count hook: ~4e12 byte compares here.
-- Expected: AT_ERR_SPEC "instruction limit" (or string.find refused).
local s = ("a"):rep(1 << 22)
local hit = s:find(("a"):rep(1 << 20) .. "b", 1, true)
return { op = "gemv" }
