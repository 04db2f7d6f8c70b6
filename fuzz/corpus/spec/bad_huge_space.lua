local v = {} for i = 1, 4096 do v[i] = i end
return { op = "gemv", bytes = function(s) return 1 end,
  strategies = { { name = "a", template = "a.cu", kernel = "a",
    params = { { "TP_A", v }, { "TP_B", v } },
    grid = function() return { 1 } end, block = function() return { 1 } end } } }
