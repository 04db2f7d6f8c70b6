-- profile_spec.lua — one candidate per strategy, for profiling with Nsight
-- Compute (ncu) under autotune: the 1x2048x5120 splitk winner and the
-- 8x2048x5120 mma winner of build b05b494 (search/gemv.lua's strategies
-- with every parameter fixed). Not a search space for tuning.
local function cdiv(a, b) return (a + b - 1) // b end
return {
  op = "gemv",
  strategies = {
    {
      name = "splitk",
      template = "gemv/gemv_splitk.cu",
      kernel = "gemv_splitk",
      params = {
        { "TP_WARPS", { 8 } }, { "TP_WPR", { 4 } }, { "TP_ROWS", { 4 } }, { "TP_VEC", { 8 } },
        { "TP_UNROLL", { 1 } }, { "TP_CACHE", { 1 } }, { "TP_PDL", { 1 } },
      },
      grid = function(p, s) return { cdiv(s.N, p.TP_WARPS // p.TP_WPR * p.TP_ROWS), s.M, 1 } end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end,
    },
    {
      name = "mma",
      template = "gemv/gemv_mma.cu",
      kernel = "gemv_mma",
      params = {
        { "TP_WARPS", { 4 } }, { "TP_WPR", { 4 } }, { "TP_KSPLIT", { 2 } }, { "TP_MT", { 1 } },
        { "TP_NT", { 1 } }, { "TP_VEC", { 8 } }, { "TP_UNROLL", { 2 } }, { "TP_STAGES", { 2 } },
        { "TP_CACHE", { 1 } }, { "TP_PDL", { 1 } },
      },
      grid = function(p, s)
        return { cdiv(s.N, p.TP_WARPS // p.TP_WPR * 16 * p.TP_MT) * p.TP_KSPLIT, cdiv(s.M, 8 * p.TP_NT), 1 }
      end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end,
    },
  },
  bytes = function(s) return s.elem * (s.N * s.K + s.M * s.K + s.M * s.N) end,
}
