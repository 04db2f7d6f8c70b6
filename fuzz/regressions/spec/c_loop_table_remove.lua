-- Hang: table.remove(t, 1) shifts the whole array in C, unseen by the count
-- hook: 300k removes run ~600k instructions but ~4.5e10 element moves.
-- Expected: AT_ERR_SPEC "instruction limit" (C work charged to the budget).
local t = {} for i = 1, 300000 do t[i] = i end
for _ = 1, #t do table.remove(t, 1) end
return { op = "gemv" }
