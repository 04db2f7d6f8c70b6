return { op = "gemv", bytes = function(s) return 1 end,
  strategies = { { name = "a", template = "../../etc/passwd", kernel = "a", params = {},
    grid = function() return { 1 } end, block = function() return { 1 } end } } }
