-- Hang: the instruction limit is per call, so 1000 constraints of ~12M
-- instructions each make one at_spec_expand run ~12G instructions (minutes).
-- Expected: AT_ERR_SPEC once the whole expansion passes a total budget.
local cons = {}
for i = 1, 1000 do cons[i] = { "c" .. i, function() for _ = 1, 12000000 do end return true end } end
return { op = "gemv", bytes = function(s) return 1 end,
  strategies = { { name = "a", template = "a.cu", kernel = "a", params = {}, constraints = cons,
    grid = function() return { 1 } end, block = function() return { 1 } end } } }
