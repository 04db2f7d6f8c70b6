return { op = "gemv", bytes = function(s) return 1 end,
  strategies = { { name = "a", template = "a.cu", kernel = "a",
    params = { { "TP_A", { 1, 2.5 } } },
    constraints = { { "num", function() return 1 end } },
    grid = function() return { 1 } end, block = function() return { 1 } end } } }
