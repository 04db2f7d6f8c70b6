-- A spec whose template fails to compile for one parameter value.
return {
  op = "gemv",
  strategies = {
    { name = "broken", template = "gemv/gemv_broken.cu", kernel = "gemv_broken",
      params = { { "TP_BREAK", { 0, 1 } } },
      constraints = {},
      grid = function(p, s) return { 1, 1, 1 } end,
      block = function(p, s) return { 32, 1, 1 } end },
  },
  bytes = function(s) return s.elem * s.N * s.K end,
}
