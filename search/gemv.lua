-- search/gemv.lua — the search space for decode GEMV, y[M,N] = x[M,K] . W[N,K]^T.
-- At M = 1 two strategies: warp_row (a warp owns TP_ROWS rows and all of K)
-- and splitk (TP_WPR warps share a row group's K, reduced in shared memory).
-- At M = 2..16, three that read each weight once for all tokens (tokens
-- past M masked, so a kernel tuned at M' serves every M <= M'):
-- multi_token (CUDA cores, TP_TOKENS tokens' sums per thread; M = 2..8, and
-- any M where the weights are tiny), mma (tensor cores, mma.sync m16n8k16
-- with W rows on the MMA's M side, tokens on its N side; two chunks in
-- flight with TP_STAGES=2, K split over a cluster of blocks with TP_KSPLIT >
-- 1 on sm_90+; TP_PRE=2 requests both chunks' weights before the PDL wait)
-- and mma_bulk (the weights by bulk copies into a shared-memory ring, sm_90+).
-- Parameter names are the templates' TP_* macros; constraints are named so a
-- pruned candidate says why. A constraint's third element is its scope:
-- "shape" (it reads the shape only: the strategy is ruled out before
-- crossing) or the one TP_* it reads (its values are cut before crossing);
-- see docs/search-spec.md. Runs sandboxed: no io, os, require.
-- One spec, nine ops: the loader hands the op as the chunk's `...`
-- (tuner/spec.c). "gemv_add" (residual[M,N] += x . W^T in place) searches the
-- same space with TP_ADD=1, the add in every template's epilogue. The fused
-- decode ops (templates/common/gemv_fuse.cuh) set TP_NORM (the RMSNorm of x
-- in the prologue: 1 plain, 2 Gemma), TP_SWIGLU (y = silu(x.Wg) * (x.Wu), N
-- the intermediate size) and, in the residual-add forms, TP_RES (z = x + res
-- feeds the norm and is written back into res: 1 by the last warp, which
-- reads x and res again; 2 staged in shared memory, written by the last
-- block from there); they live in the CUDA-core
-- templates only, and multi_token serves them up to M = 16 (two groups of 8
-- tokens), since the tensor-core templates have no fused form.

local OPS = {
  gemv                      = { add = 0, norm = 0, swiglu = 0 },
  gemv_add                  = { add = 1, norm = 0, swiglu = 0 },
  rmsnorm_gemv              = { add = 0, norm = 1, swiglu = 0 },
  gemma_rmsnorm_gemv        = { add = 0, norm = 2, swiglu = 0 },
  gemv_swiglu               = { add = 0, norm = 0, swiglu = 1 },
  rmsnorm_gemv_swiglu       = { add = 0, norm = 1, swiglu = 1 },
  gemma_rmsnorm_gemv_swiglu = { add = 0, norm = 2, swiglu = 1 },
  add_rmsnorm_gemv          = { add = 0, norm = 1, swiglu = 0, res = 1 },
  add_gemma_rmsnorm_gemv    = { add = 0, norm = 2, swiglu = 0, res = 1 },
}
local op = ... or "gemv"
if not OPS[op] then
  error("search/gemv.lua serves the ops gemv, gemv_add, rmsnorm_gemv, gemma_rmsnorm_gemv, gemv_swiglu, " ..
        "rmsnorm_gemv_swiglu, gemma_rmsnorm_gemv_swiglu, add_rmsnorm_gemv and add_gemma_rmsnorm_gemv, not " ..
        tostring(op))
end
local ADD, NORM, SWIGLU, RES = OPS[op].add, OPS[op].norm, OPS[op].swiglu, OPS[op].res or 0
local FUSED = NORM > 0 or SWIGLU == 1

local function cdiv(a, b) return (a + b - 1) // b end

-- A strategy's params, with TP_ADD=1 appended for gemv_add and TP_NORM,
-- TP_SWIGLU for the fused ops (gemv's candidates keep their parameter
-- strings: 0 is each one's template default).
local function params(list)
  if ADD == 1 then list[#list + 1] = { "TP_ADD", { 1 } } end
  if NORM > 0 then list[#list + 1] = { "TP_NORM", { NORM } } end
  if SWIGLU == 1 then list[#list + 1] = { "TP_SWIGLU", { 1 } } end
  if RES == 1 then list[#list + 1] = { "TP_RES", { 1, 2 } } end
  return list
end

-- TP_RES=2 stages the block's z in dynamic shared memory: K elements per
-- token of the block (common/gemv_fuse.cuh); the other forms use none.
local function staged_smem(p, s)
  if p.TP_RES == 2 then return s.K * (p.TP_TOKENS or 1) * s.elem end
  return 0
end

local staged_z_fits = { "staged_z_fits", function(p, s)
  -- the staged z beside the block's static arrays (under 2 KiB) within the
  -- 48 KiB a kernel gets without raising its dynamic limit
  local bytes = staged_smem(p, s)
  if bytes > 46 * 1024 then return "TP_RES=2 stages " .. bytes .. " B of z > 46 KiB" end
  return true
end }

-- TP_PF (warp_row and splitk): the block's weight tile asked of L2 before
-- the PDL wait. Searched where a prologue (the norm's sum of squares) or an
-- epilogue read (the residual) sits between the wait and the weights; the
-- plain gemv keeps its space.
local function pf(list)
  if ADD == 1 or FUSED then list[#list + 1] = { "TP_PF", { 0, 1 } } end
  return list
end

-- Weight rows a thread holds per output row: SwiGLU reads the gate's and the up's.
local function wrows(p) return p.TP_ROWS * (1 + SWIGLU) end

-- The tensor-core strategies have no fused form.
local cuda_cores_fuse = { "cuda_cores_fuse", function(p, s)
  if FUSED then return op .. ": the fused forms are warp_row, splitk and multi_token" end
  return true
end, "shape" }

-- Shared by both strategies.
local vec_divides_k = { "vec_divides_k", function(p, s)
  -- 16-byte (TP_VEC=8) loads need every row of W to start 16-byte aligned
  if s.K % p.TP_VEC ~= 0 then return "K % TP_VEC ~= 0: rows would be misaligned" end
  return true
end, "TP_VEC" }

local widest_vec = { "widest_vec", function(p, s)
  -- a narrower load only where K forbids the wider one: it is never faster
  if p.TP_VEC < 8 and s.K % (p.TP_VEC * 2) == 0 then
    return "K allows TP_VEC=" .. (p.TP_VEC * 2)
  end
  return true
end, "TP_VEC" }

local pdl_needs_sm90 = { "pdl_needs_sm90", function(p, s)
  -- griddepcontrol (programmatic dependent launch) exists from Hopper on
  if p.TP_PDL == 1 and s.arch < 90 then return "TP_PDL=1 needs sm_90" end
  return true
end, "TP_PDL" }

local registers_for_loads = { "registers_for_loads", function(p, s)
  -- TP_ROWS*TP_UNROLL vectors in flight per thread; beyond 16 they spill
  return wrows(p) * p.TP_UNROLL <= 16
end }

local bf16_needs_sm80 = { "bf16_needs_sm80", function(p, s)
  -- the bf16 store (cvt.rn.bf16.f32 in common/dtype.cuh) exists from Ampere on
  if s.dtype == "bf16" and s.arch < 80 then return "bf16 needs sm_80" end
  return true
end, "shape" }

-- Shared by the strategies whose TP_WPR warps split one row's K (splitk,
-- multi_token): every warp gets a vector of K; a block whose rows mostly
-- fall past N wastes its warps.
local every_warp_has_k = { "every_warp_has_k", function(p, s)
  -- each of the TP_WPR warps must get at least one vector of K
  if 32 * p.TP_WPR * p.TP_VEC > s.K then return "K too short for " .. p.TP_WPR .. " warps per row" end
  return true
end }

local split_block_n_within_n = { "block_n_within_n", function(p, s)
  local block_n = p.TP_WARPS // p.TP_WPR * p.TP_ROWS
  if block_n > 1 and block_n >= 2 * s.N then return "block_n " .. block_n .. " >= 2N" end
  return true
end }

-- multi_token and mma (splitk keeps its measured boolean form)
local wpr_divides_warps = { "wpr_divides_warps", function(p, s)
  if p.TP_WARPS % p.TP_WPR ~= 0 then return "TP_WARPS % TP_WPR ~= 0" end
  return true
end }

local one_token = { "one_token", function(p, s)
  -- last in the M=1 strategies' lists, so M=1 prunes exactly as it was
  -- measured; with more tokens they would read every weight once per token
  if s.M > 1 then return "M > 1: multi_token and mma read each weight once" end
  return true
end, "shape" }

local independent_warps = { "independent_warps", function(p, s)
  -- with TP_WPR=1 a block's warps share nothing: 4 or 8 per block behave
  -- alike, so only 4 (keeps the M > 1 space and its CI compile small)
  if p.TP_WPR == 1 and p.TP_WARPS ~= 4 then return "TP_WPR=1 takes TP_WARPS=4" end
  return true
end }

local MULTI_TOKEN_MAX_M = 8 -- beyond: the mma strategy alone, unless the weights are tiny

-- Weights this small stay in L2 while the kernel runs, so a second group of
-- tokens re-reads them from L2, not from memory: multi_token may then split
-- the tokens over blocks along y (at N = 32, M = 8 on the H200, one group of
-- 8 tokens took 1.49x the M=1 time, two groups of 4 1.11x).
local function tiny_weights(s) return s.N * s.K * s.elem <= 2 * 1024 * 1024 end

-- Shared by the tensor-core strategies (mma, mma_bulk).
local mma_m = { "mma_m", function(p, s)
  if s.M < 2 then return "M=1: warp_row and splitk" end
  return true
end, "shape" }

local nt_covers_m = { "nt_covers_m", function(p, s)
  -- the fewest 8-token tiles that hold M (up to 2; more tokens: more blocks)
  local want = s.M <= 8 and 1 or 2
  if p.TP_NT ~= want then return "M=" .. s.M .. " takes TP_NT=" .. want end
  return true
end, "TP_NT" }

-- [MMA_KSTEP] mma: elements of K per step, AT_MMA_KSTEP in common/mma.cuh
local function mma_kstep(p) return p.TP_VEC == 8 and 32 or 16 end
-- mma: output rows per block (a cluster's TP_KSPLIT blocks share them)
local function mma_block_n(p) return p.TP_WARPS // p.TP_WPR * 16 * p.TP_MT end
-- mma: elements of K one round of a row group's TP_KSPLIT * TP_WPR warps
-- covers at `unroll` steps per warp (TP_UNROLL: one chunk each)
local function mma_chunk(p, unroll) return p.TP_KSPLIT * p.TP_WPR * unroll * mma_kstep(p) end
local function sms(s) return s.sms > 0 and s.sms or 132 end -- dry runs: an H200's

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
  op = op,
  strategies = {
    {
      name = "warp_row",
      template = "gemv/gemv_warp_row.cu",
      kernel = "gemv_warp_row",
      params = pf(params {
        { "TP_WARPS",  { 1, 2, 4, 8, 16 } },
        { "TP_ROWS",   { 1, 2, 4, 8 } },
        { "TP_VEC",    { 8, 4, 2, 1 } },
        { "TP_UNROLL", { 1, 2, 4, 8 } },
        { "TP_CACHE",  { 0, 1, 2 } },
        { "TP_PDL",    { 0, 1 } },
      }),
      constraints = {
        bf16_needs_sm80, pdl_needs_sm90, vec_divides_k, widest_vec, registers_for_loads, unroll_within_k(1),
        { "block_n_within_n", function(p, s)
          -- a block whose rows mostly fall past N wastes its warps
          local block_n = p.TP_WARPS * p.TP_ROWS
          if block_n > 1 and block_n >= 2 * s.N then return "block_n " .. block_n .. " >= 2N" end
          return true
        end },
        one_token,
        staged_z_fits,
      },
      grid = function(p, s) return { cdiv(s.N, p.TP_WARPS * p.TP_ROWS), s.M, 1 } end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end,
      smem = staged_smem,
    },
    {
      name = "splitk",
      template = "gemv/gemv_splitk.cu",
      kernel = "gemv_splitk",
      params = pf(params {
        { "TP_WARPS",  { 2, 4, 8, 16 } },
        { "TP_WPR",    { 2, 4, 8, 16 } },
        { "TP_ROWS",   { 1, 2, 4 } },
        { "TP_VEC",    { 8, 4, 2, 1 } },
        { "TP_UNROLL", { 1, 2, 4 } },
        { "TP_CACHE",  { 0, 1, 2 } },
        { "TP_PDL",    { 0, 1 } },
      }),
      constraints = {
        bf16_needs_sm80, pdl_needs_sm90,
        { "wpr_divides_warps", function(p, s) return p.TP_WARPS % p.TP_WPR == 0 end },
        vec_divides_k, widest_vec, registers_for_loads, unroll_within_k(nil),
        every_warp_has_k,
        split_block_n_within_n,
        one_token,
        staged_z_fits,
      },
      grid = function(p, s) return { cdiv(s.N, p.TP_WARPS // p.TP_WPR * p.TP_ROWS), s.M, 1 } end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end,
      smem = staged_smem,
    },
    {
      -- CUDA cores, TP_TOKENS tokens per block
      name = "multi_token",
      template = "gemv/gemv_multi_token.cu",
      kernel = "gemv_multi_token",
      params = params {
        { "TP_WARPS",  { 4, 8, 16 } },
        { "TP_WPR",    { 1, 2, 4, 8, 16 } }, -- 8, 16: tiny N, where a few blocks must cover K
        { "TP_ROWS",   { 1, 2, 4 } },
        { "TP_TOKENS", { 2, 4, 8 } }, -- 8: M = 5..8
        { "TP_VEC",    { 8, 4, 2, 1 } },
        { "TP_UNROLL", { 1, 2 } },
        { "TP_CACHE",  { 1 } }, -- won 9 of the 14 M=1 shapes on the H200 (2 the rest, 0 none)
        { "TP_PDL",    { 0, 1 } },
      },
      constraints = {
        { "multi_token_m", function(p, s)
          -- one block holds all tokens' sums: a few tokens only
          if s.M < 2 then return "M=1: warp_row and splitk" end
          if s.M > MULTI_TOKEN_MAX_M and not tiny_weights(s) and not FUSED then
            return "M > " .. MULTI_TOKEN_MAX_M .. ": mma"
          end
          return true
        end, "shape" },
        bf16_needs_sm80,
        { "tokens_cover_m", function(p, s)
          -- the smallest TP_TOKENS that holds M: each weight read once from
          -- memory (tiny weights: any fewer, the other groups read L2)
          local want = s.M <= 2 and 2 or (s.M <= 4 and 4 or 8)
          if tiny_weights(s) and p.TP_TOKENS <= want then return true end
          if p.TP_TOKENS ~= want then return "M=" .. s.M .. " takes TP_TOKENS=" .. want end
          return true
        end, "TP_TOKENS" },
        pdl_needs_sm90,
        wpr_divides_warps,
        independent_warps,
        vec_divides_k, widest_vec,
        { "registers_for_loads", function(p, s)
          -- weight and activation vectors in flight, and the sums, per thread
          if (wrows(p) + p.TP_TOKENS) * p.TP_UNROLL > 12 then return "too many vectors in flight" end
          if wrows(p) * p.TP_TOKENS > 16 then return "more than 16 sums per thread" end
          return true
        end },
        unroll_within_k(nil),
        every_warp_has_k,
        split_block_n_within_n,
        staged_z_fits,
      },
      grid = function(p, s) return { cdiv(s.N, p.TP_WARPS // p.TP_WPR * p.TP_ROWS), cdiv(s.M, p.TP_TOKENS), 1 } end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end,
      smem = staged_smem,
    },
    {
      -- tensor cores, 16 rows x 8 tokens per mma
      name = "mma",
      template = "gemv/gemv_mma.cu",
      kernel = "gemv_mma",
      params = params {
        { "TP_WARPS",  { 4, 8, 16 } },
        { "TP_WPR",    { 1, 2, 4, 8, 16 } }, -- M=8 winners sat at the old edge, 8 of 8
        { "TP_KSPLIT", { 1, 2, 4, 8 } }, -- blocks of a cluster sharing K (sm_90+)
        { "TP_MT",     { 1, 2 } },
        { "TP_NT",     { 1, 2 } },
        { "TP_VEC",    { 8, 4, 2, 1 } },
        { "TP_UNROLL", { 1, 2, 4, 8 } },
        { "TP_STAGES", { 1, 2 } },
        { "TP_PRE",    { 1, 2 } }, -- 2: both chunks' weights before the PDL wait
        { "TP_XK",     { 0, 256, 512, 1024, 2048 } }, -- > 0: the block's activations in shared memory
        { "TP_CACHE",  { 1 } }, -- the M > 1 winners on the H200: 46 of 46 streaming
        { "TP_PDL",    { 0, 1 } },
      },
      constraints = {
        mma_m, cuda_cores_fuse,
        { "mma_needs_sm80", function(p, s)
          -- mma.sync m16n8k16 with bf16 exists from Ampere on
          if s.arch < 80 then return "mma.m16n8k16.bf16 needs sm_80" end
          return true
        end, "shape" },
        nt_covers_m,
        pdl_needs_sm90,
        { "ksplit_needs_sm90", function(p, s)
          -- thread block clusters (distributed shared memory) exist from Hopper on
          if p.TP_KSPLIT > 1 and s.arch < 90 then return "TP_KSPLIT > 1 needs sm_90" end
          return true
        end, "TP_KSPLIT" },
        wpr_divides_warps,
        independent_warps,
        { "ksplit_for_few_tiles", function(p, s)
          -- splitting K over blocks pays only where the row tiles alone
          -- leave the SMs short of work; past 8 blocks per SM it only adds sums
          if p.TP_KSPLIT == 1 then return true end
          local tiles = cdiv(s.N, mma_block_n(p))
          if tiles >= 4 * sms(s) then return tiles .. " row tiles: enough blocks without a K split" end
          if tiles * p.TP_KSPLIT > 8 * sms(s) then return "more than 8 blocks per SM" end
          return true
        end },
        vec_divides_k, widest_vec,
        { "registers_for_loads", function(p, s)
          -- k-groups held per thread (4 registers each): 2 per row tile and
          -- 1 per token tile, per step and stage; ptxas rejects the rest by spills
          if (2 * p.TP_MT + p.TP_NT) * p.TP_UNROLL * p.TP_STAGES > 24 then
            return "too many k-groups in flight"
          end
          return true
        end },
        { "every_warp_has_k", function(p, s)
          -- each of the TP_KSPLIT * TP_WPR warps gets at least one step of K
          if mma_chunk(p, 1) > s.K then return "K too short for " .. p.TP_KSPLIT * p.TP_WPR .. " warps per row" end
          return true
        end },
        { "unroll_within_k", function(p, s)
          -- every warp gets at least one whole chunk, or the unrolled loop never runs
          local chunk = mma_chunk(p, p.TP_UNROLL)
          if p.TP_UNROLL > 1 and chunk > s.K then return "block_k " .. chunk .. " > K" end
          return true
        end },
        { "unroll_one_for_short_k", function(p, s)
          -- one step per chunk only where two do not fit (no M=8 winner on the
          -- H200 had TP_UNROLL=1 where two fit)
          if p.TP_UNROLL == 1 and mma_chunk(p, 2) <= s.K then return "K fits TP_UNROLL=2" end
          return true
        end },
        { "pre_needs_stages", function(p, s)
          -- the second chunk loaded before the wait goes to TP_STAGES=2's
          -- second buffer; on the H200 (8x2048x5120) it made the fastest
          -- config 6.86 -> 6.29 us but others slower, so it is searched
          if p.TP_PRE == 2 and p.TP_STAGES ~= 2 then return "TP_PRE=2 needs TP_STAGES=2" end
          return true
        end },
        { "pre_needs_pdl", function(p, s)
          -- without the PDL wait (sm_80/89, or TP_PDL=0) TP_PRE=2 only
          -- issues the second chunk's weight loads ahead of the first
          -- chunk's activation loads: the same kernel for any purpose
          if p.TP_PRE == 2 and p.TP_PDL ~= 1 then return "TP_PRE=2 needs TP_PDL=1" end
          return true
        end },
        { "stages_need_chunks", function(p, s)
          -- a second stage is idle unless each warp has two chunks of K
          if p.TP_STAGES > 1 and 2 * mma_chunk(p, p.TP_UNROLL) > s.K then return "fewer than 2 chunks per warp" end
          return true
        end },
        { "block_n_within_n", function(p, s)
          local block_n = mma_block_n(p)
          if block_n > 16 and block_n >= 2 * s.N then return "block_n " .. block_n .. " >= 2N" end
          return true
        end },
        { "x_in_smem", function(p, s)
          -- TP_XK > 0: the smallest size that holds the block's activations
          -- (its whole chunks: rounds of its TP_WPR warps' chunks)
          if p.TP_XK == 0 then return true end
          if p.TP_VEC ~= 8 then return "TP_XK > 0 copies 16 bytes: TP_VEC=8" end
          -- on the H200 the TP_XK winners (2048x2048 at M = 2, 4, 8) were
          -- all TP_STAGES=1; no TP_STAGES=2 one won
          if p.TP_STAGES == 2 then return "TP_XK > 0 takes TP_STAGES=1" end
          local nchunks = s.K // mma_kstep(p) // p.TP_UNROLL
          local need = cdiv(nchunks, p.TP_KSPLIT * p.TP_WPR) * p.TP_WPR * p.TP_UNROLL * mma_kstep(p)
          if need == 0 then return "no whole chunk of K" end
          if need > p.TP_XK then return "the block's " .. need .. " elements of K > TP_XK" end
          if p.TP_XK > 256 and p.TP_XK // 2 >= need then return "TP_XK/" .. 2 .. " holds the block's K" end
          return true
        end },
        { "static_smem", function(p, s)
          -- the K-split sums (warps, then cluster blocks) and the TP_XK
          -- activations in 48 KiB of static shared memory
          local groups, nacc = p.TP_WARPS // p.TP_WPR, p.TP_MT * p.TP_NT * 4
          local bytes = (groups * (p.TP_WPR - 1) + (p.TP_KSPLIT - 1) * groups) * nacc * 32 * 4
          if p.TP_XK > 0 then bytes = bytes + 8 * p.TP_NT * (2 * p.TP_XK + 64) end
          if bytes > 48 * 1024 then return bytes .. " B of shared memory > 48 KiB" end
          return true
        end },
      },
      grid = function(p, s)
        return { cdiv(s.N, mma_block_n(p)) * p.TP_KSPLIT, cdiv(s.M, 8 * p.TP_NT), 1 }
      end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end,
    },
    {
      -- tensor cores as mma, the weights brought into shared memory by the
      -- copy engine (sm_90+): a block's first TP_DEPTH chunks are requested
      -- at once, before the wait on the previous kernel, holding no registers
      name = "mma_bulk",
      template = "gemv/gemv_mma_bulk.cu",
      kernel = "gemv_mma_bulk",
      params = params {
        { "TP_WARPS",  { 2, 4, 8 } },
        { "TP_MT",     { 1, 2 } },
        { "TP_NT",     { 1, 2 } },
        { "TP_KC",     { 128, 256, 512 } }, -- K elements per chunk (one bulk copy per row)
        { "TP_DEPTH",  { 1, 2, 3, 4 } }, -- chunks in the shared-memory ring
        { "TP_KSPLIT", { 1, 2, 4, 8 } },
        { "TP_VEC",    { 8 } },
        { "TP_CACHE",  { 0, 2 } },
        { "TP_PDL",    { 0, 1 } },
      },
      constraints = {
        mma_m, cuda_cores_fuse,
        { "bulk_needs_sm90", function(p, s)
          -- cp.async.bulk with mbarrier transaction counts exists from Hopper on
          if s.arch < 90 then return "bulk copies need sm_90" end
          return true
        end, "shape" },
        nt_covers_m,
        { "rows_16_byte_aligned", function(p, s)
          -- a bulk copy moves 16-byte multiples between 16-byte aligned ends
          if s.K % 8 ~= 0 then return "K % 8 ~= 0: rows are not 16-byte aligned" end
          return true
        end },
        { "steps_per_warp", function(p, s)
          -- every warp takes the same whole 32-element steps of a chunk
          if p.TP_KC % (32 * p.TP_WARPS) ~= 0 then return "TP_KC " .. p.TP_KC .. " is not whole steps for each warp" end
          return true
        end },
        { "ksplit_for_few_tiles", function(p, s)
          if p.TP_KSPLIT == 1 then return true end
          local tiles = cdiv(s.N, 16 * p.TP_MT)
          if tiles >= 4 * sms(s) then return tiles .. " row tiles: enough blocks without a K split" end
          if tiles * p.TP_KSPLIT > 8 * sms(s) then return "more than 8 blocks per SM" end
          return true
        end },
        { "every_block_has_chunks", function(p, s)
          -- the cluster's blocks take runs of whole chunks; none may be empty
          local nck = cdiv(s.K, p.TP_KC)
          if (p.TP_KSPLIT - 1) * cdiv(nck, p.TP_KSPLIT) >= nck then return "a block of the cluster gets no chunk" end
          return true
        end },
        { "chunk_within_k", function(p, s)
          -- a chunk twice a block's share of K only adds shared memory
          if p.TP_KC > 128 and p.TP_KC // 2 >= cdiv(s.K, p.TP_KSPLIT) then return "TP_KC/2 covers a block's K" end
          return true
        end },
        { "ring_depth", function(p, s)
          -- a slot per chunk at most; a ring of one only where one chunk is all
          local chunks = cdiv(cdiv(s.K, p.TP_KC), p.TP_KSPLIT)
          if p.TP_DEPTH > chunks then return "deeper than the block's " .. chunks .. " chunks" end
          if p.TP_DEPTH == 1 and chunks > 1 then return "one slot for " .. chunks .. " chunks: no overlap" end
          return true
        end },
        pdl_needs_sm90,
        { "block_n_within_n", function(p, s)
          if p.TP_MT > 1 and 16 * p.TP_MT >= 2 * s.N then return "block_n " .. 16 * p.TP_MT .. " >= 2N" end
          return true
        end },
        { "static_smem", function(p, s)
          -- the ring, its barriers and the K-split sums in 48 KiB of static shared memory
          local nacc = p.TP_MT * p.TP_NT * 4
          local bytes = p.TP_DEPTH * 16 * p.TP_MT * (2 * p.TP_KC + 64) + 8 * p.TP_DEPTH
                        + (p.TP_WARPS - 1 + p.TP_KSPLIT - 1) * nacc * 32 * 4
          if bytes > 48 * 1024 then return bytes .. " B of shared memory > 48 KiB" end
          return true
        end },
      },
      grid = function(p, s)
        return { cdiv(s.N, 16 * p.TP_MT) * p.TP_KSPLIT, cdiv(s.M, 8 * p.TP_NT), 1 }
      end,
      block = function(p, s) return { 32 * p.TP_WARPS, 1, 1 } end,
    },
  },
  -- weights once, activations once, outputs once (at M > 1 only strategies
  -- that read each weight once are live); gemv_add reads the residual too,
  -- SwiGLU two weights, the norm its weight vector
  bytes = function(s)
    return s.elem * ((1 + SWIGLU) * s.N * s.K + (1 + 2 * RES) * s.M * s.K + (1 + ADD) * s.M * s.N +
                     (NORM > 0 and s.K or 0))
  end,
}
