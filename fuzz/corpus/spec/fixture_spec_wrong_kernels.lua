-- A spec over gemv_wrong.cu: one correct naive variant and planted bugs.
return {
  op = "gemv",
  strategies = {
    { name = "naive", template = "gemv/gemv_wrong.cu", kernel = "gemv_wrong",
      params = { { "TP_BUG", { 0, 1, 2, 3 } }, { "TP_THREADS", { 128 } } },
      constraints = {},
      grid = function(p, s) return { (s.N + p.TP_THREADS - 1) // p.TP_THREADS, s.M, 1 } end,
      block = function(p, s) return { p.TP_THREADS, 1, 1 } end },
  },
  bytes = function(s) return s.elem * (s.N * s.K + s.M * s.K + s.M * s.N) end,
}
