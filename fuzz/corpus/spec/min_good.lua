return { op = "gemv", bytes = function(s) return s.elem * s.N * s.K end,
  strategies = { { name = "a", template = "gemv/a.cu", kernel = "a",
    params = { { "TP_X", { 1, 2 } } },
    grid = function(p, s) return { s.N } end, block = function(p, s) return { 32 * p.TP_X } end } } }
