-- search/gemv.lua — the search space for decode GEMV, y[M,N] = x[M,K] . W[N,K]^T.
-- Two strategies: warp_row (a warp owns TP_ROWS rows and all of K) and
-- splitk (TP_WPR warps share a row group's K, reduced in shared memory).
-- Parameter names are the templates' TP_* macros; constraints are named so a
-- pruned candidate says why. Runs sandboxed: no io, os, require.

local function cdiv(a, b) return (a + b - 1) // b end

-- Shared by both strategies.
local vec_divides_k = { "vec_divides_k", function(p, s)
  -- 16-byte (TP_VEC=8) loads need every row of W to start 16-byte aligned
  if s.K % p.TP_VEC ~= 0 then return "K % TP_VEC ~= 0: rows would be misaligned" end
  return true
end }

local widest_vec = { "widest_vec", function(p, s)
  -- a narrower load only where K forbids the wider one: it is never faster
  if p.TP_VEC < 8 and s.K % (p.TP_VEC * 2) == 0 then
    return "K allows TP_VEC=" .. (p.TP_VEC * 2)
  end
  return true
end }

local pdl_needs_sm90 = { "pdl_needs_sm90", function(p, s)
  -- griddepcontrol (programmatic dependent launch) exists from Hopper on
  if p.TP_PDL == 1 and s.arch < 90 then return "TP_PDL=1 needs sm_90" end
  return true
end }

local registers_for_loads = { "registers_for_loads", function(p, s)
  -- TP_ROWS*TP_UNROLL vectors in flight per thread; beyond 16 they spill
  return p.TP_ROWS * p.TP_UNROLL <= 16
end }

local function unroll_within_k(wpr)
  return { "unroll_within_k", function(p, s)
    -- one unrolled step must fit in K, or the main loop never runs
    local block_k = 32 * (wpr or p.TP_WPR) * p.TP_VEC * p.TP_UNROLL
    if p.TP_UNROLL > 1 and block_k > s.K then
      return "block_k " .. block_k .. " > K"
    end
    return true
  end }
end

return {
  op = "gemv",
  strategies = {
    {
      name = "warp_row",
      template = "gemv/gemv_warp_row.cu",
      kernel = "gemv_warp_row",
      params = {
        { "TP_WARPS",  { 1, 2, 4, 8, 16 } },
        { "TP_ROWS",   { 1, 2, 4, 8 } },
        { "TP_VEC",    { 8, 4, 2, 1 } },
        { "TP_UNROLL", { 1, 2, 4, 8 } },
        { "TP_CACHE",  { 0, 1, 2 } },
        { "TP_PDL",    { 0, 1 } },
      },
      constraints = {
        pdl_needs_sm90, vec_divides_k, widest_vec, registers_for_loads, unroll_within_k(1),
        { "block_n_within_n", function(p, s)
          -- a block whose rows mostly fall past N wastes its warps
          local block_n = p.TP_WARPS * p.TP_ROWS
          if block_n > 1 and block_n >= 2 * s.N then return "block_n " .. block_n .. " >= 2N" end
          return true
        end },
      },
      grid = function(p, s) return { cdiv(s.N, p.TP_WARPS * p.TP_ROWS), s.M, 1 } end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end,
    },
    {
      name = "splitk",
      template = "gemv/gemv_splitk.cu",
      kernel = "gemv_splitk",
      params = {
        { "TP_WARPS",  { 2, 4, 8, 16 } },
        { "TP_WPR",    { 2, 4, 8, 16 } },
        { "TP_ROWS",   { 1, 2, 4 } },
        { "TP_VEC",    { 8, 4, 2, 1 } },
        { "TP_UNROLL", { 1, 2, 4 } },
        { "TP_CACHE",  { 0, 1, 2 } },
        { "TP_PDL",    { 0, 1 } },
      },
      constraints = {
        pdl_needs_sm90,
        { "wpr_divides_warps", function(p, s) return p.TP_WARPS % p.TP_WPR == 0 end },
        vec_divides_k, widest_vec, registers_for_loads, unroll_within_k(nil),
        { "every_warp_has_k", function(p, s)
          -- each of the TP_WPR warps must get at least one vector of K
          if 32 * p.TP_WPR * p.TP_VEC > s.K then return "K too short for " .. p.TP_WPR .. " warps per row" end
          return true
        end },
        { "block_n_within_n", function(p, s)
          local block_n = p.TP_WARPS // p.TP_WPR * p.TP_ROWS
          if block_n > 1 and block_n >= 2 * s.N then return "block_n " .. block_n .. " >= 2N" end
          return true
        end },
      },
      grid = function(p, s) return { cdiv(s.N, p.TP_WARPS // p.TP_WPR * p.TP_ROWS), s.M, 1 } end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end,
    },
  },
  -- weights once, activations once, outputs once
  bytes = function(s) return s.elem * (s.N * s.K + s.M * s.K + s.M * s.N) end,
}
