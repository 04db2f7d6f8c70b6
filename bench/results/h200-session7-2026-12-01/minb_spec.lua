-- minb_spec.lua — an experiment, not a tuning space: the mma configs around
-- the 8x2048x5120 winner (b05b494: 96 registers, 5 blocks of 4 warps per
-- SM, occupancy 0.31) with __launch_bounds__ asking for TP_MINB blocks per
-- SM, to see whether more resident warps beat more loads in flight per warp.
-- Candidates that spill are rejected as in search/gemv.lua.
local function cdiv(a, b) return (a + b - 1) // b end
return {
  op = "gemv",
  strategies = {
    {
      name = "mma",
      template = "gemv/gemv_mma.cu",
      kernel = "gemv_mma",
      params = {
        { "TP_WARPS", { 4, 8 } }, { "TP_WPR", { 4, 8 } }, { "TP_KSPLIT", { 1, 2 } }, { "TP_MT", { 1 } },
        { "TP_NT", { 1 } }, { "TP_VEC", { 8 } }, { "TP_UNROLL", { 1, 2, 4 } }, { "TP_STAGES", { 1, 2 } },
        { "TP_CACHE", { 1 } }, { "TP_PDL", { 1 } }, { "TP_MINB", { 1, 4, 6, 8 } },
      },
      constraints = {
        { "wpr_divides_warps", function(p, s) return p.TP_WARPS % p.TP_WPR == 0 end },
        { "registers_for_loads", function(p, s) return 3 * p.TP_UNROLL * p.TP_STAGES <= 24 end },
        { "chunks", function(p, s)
          return p.TP_STAGES * p.TP_KSPLIT * p.TP_WPR * p.TP_UNROLL * 32 <= s.K
        end },
      },
      grid = function(p, s)
        return { cdiv(s.N, p.TP_WARPS // p.TP_WPR * 16 * p.TP_MT) * p.TP_KSPLIT, cdiv(s.M, 8 * p.TP_NT), 1 }
      end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end,
    },
  },
  bytes = function(s) return s.elem * (s.N * s.K + s.M * s.K + s.M * s.N) end,
}
