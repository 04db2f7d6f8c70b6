-- spec_good.lua: a small two-strategy GEMV space for tests/test_spec.c.
-- Expected with M=1 K=4096 N=4 sms=2: 12 warp_row + 3 splitk = 15 candidates.
return {
  op = "gemv",
  strategies = {
    {
      name = "warp_row",
      template = "gemv/gemv_warp_row.cu",
      kernel = "gemv_warp_row",
      params = {
        { "TP_WARPS", {2, 4} },
        { "TP_ROWS",  {1, 2} },
        { "TP_VEC",   {8, 4, 3} },
      },
      constraints = {
        { "vec_divides_k", function(p, s) return s.K % p.TP_VEC == 0 end },
        { "rows_fit", function(p, s)
            if p.TP_ROWS * p.TP_WARPS > s.N then return "more rows than N" end
            return true
          end },
      },
      grid  = function(p, s) return { (s.N + p.TP_ROWS * p.TP_WARPS - 1) // (p.TP_ROWS * p.TP_WARPS), s.M, 1 } end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end,
      smem  = function(p, s) return 16 * p.TP_WARPS end,
    },
    {
      name = "splitk",
      template = "gemv/gemv_splitk.cu",
      kernel = "gemv_splitk",
      params = { { "TP_SPLIT", {1.0, 2, 4} } },  -- 1.0: integral floats are accepted
      constraints = {
        { "split_fits", function(p, s) return p.TP_SPLIT <= s.sms or nil end },
      },
      grid  = function(p, s) return { s.N, p.TP_SPLIT } end,  -- z defaults to 1
      block = function(p, s) return { 128.0 } end,
    },
  },
  bytes = function(s) return s.elem * (s.N * s.K + s.M * s.K + s.M * s.N) end,
}
