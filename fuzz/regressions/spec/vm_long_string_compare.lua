-- Hang: comparing two equal 16 MiB strings is one VM instruction (OP_EQ is a
-- memcmp in C; OP_LT is strcoll, and t[u] with an equal key compares too),
-- unseen by the count hook: ~12M compares per 50M-instruction budget.
-- Expected: AT_ERR_SPEC (needs a time backstop, or a much smaller cap on
-- string size).
local s, u = ("x"):rep(1 << 24), ("x"):rep(1 << 24)
local x
for _ = 1, 1e9 do x = (s == u) end
return { op = "gemv" }
