return { op = "gemv", bytes = function(s) return 1 end,
  strategies = { { name = "a", template = "a.cu", kernel = "a", params = { { "TP_A", { 1, 2 } } },
    grid = function() return "wide" end, block = function() return { 2048 } end } } }
