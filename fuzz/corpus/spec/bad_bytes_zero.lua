return { op = "gemv", bytes = function(s) return 0 / 0 end,
  strategies = { { name = "a", template = "a.cu", kernel = "a", params = {},
    grid = function() return { 1 } end, block = function() return { 1 } end } } }
