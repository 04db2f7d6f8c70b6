-- A 12-candidate slice of search/gemv.lua (warp_row, TP_VEC=1 only), small
-- enough to run under compute-sanitizer on an odd-K shape such as 1x2051x333.
return {
  op = "gemv",
  strategies = {
    { name = "warp_row", template = "gemv/gemv_warp_row.cu", kernel = "gemv_warp_row",
      params = { { "TP_WARPS", { 1 } }, { "TP_ROWS", { 1 } }, { "TP_VEC", { 1 } },
                 { "TP_UNROLL", { 1, 2 } }, { "TP_CACHE", { 0, 1, 2 } }, { "TP_PDL", { 0, 1 } } },
      constraints = {},
      grid = function(p, s) return { (s.N + p.TP_WARPS * p.TP_ROWS - 1) // (p.TP_WARPS * p.TP_ROWS), s.M, 1 } end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end },
  },
  bytes = function(s) return s.elem * (s.N * s.K + s.M * s.K + s.M * s.N) end,
}
