-- Slow load: 1000 strategies x 16 params x 4096 values, each checked for
-- repeats in O(n^2) C with no instruction limit (~50 s at -O1, minutes under
-- ASan) for a space that at_spec_expand then refuses as too large.
local v = {} for i = 1, 4096 do v[i] = i end
local params = {} for i = 1, 16 do params[i] = { "TP_P" .. i, v } end
local st = {}
for i = 1, 1000 do
  st[i] = { name = "s" .. i, template = "a.cu", kernel = "a", params = params,
            grid = function() return { 1 } end, block = function() return { 1 } end }
end
return { op = "gemv", bytes = function(s) return 1 end, strategies = st }
