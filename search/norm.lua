-- search/norm.lua — the search space of the four RMSNorm ops on TxH (tokens
-- x hidden), one text: the tuner hands the op it loads this spec for as the
-- chunk's argument (`...`), and the op picks the template's TP_OP:
--   rmsnorm            y = x * rsqrt(mean(x^2) + eps) * w
--   add_rmsnorm        z = x + residual, rounded and stored back into
--                      residual, then y as rmsnorm from the rounded z
--   gemma_rmsnorm      y = x * rsqrt(mean(x^2) + eps) * (1 + w)
--   add_gemma_rmsnorm  the add form of gemma_rmsnorm
-- w in the element dtype, fp32 math, y rounded once (tuner/norm_ref.h states
-- the rounding). Parameter names are the templates' TP_* macros; constraints
-- are named. Runs sandboxed.

local OP = ...
local TP_OP = ({ rmsnorm = 0, add_rmsnorm = 1, gemma_rmsnorm = 2, add_gemma_rmsnorm = 3 })[OP]
if TP_OP == nil then
  error("norm.lua is the spec of rmsnorm, add_rmsnorm, gemma_rmsnorm and add_gemma_rmsnorm; "
        .. "it was loaded for " .. (OP and ("'" .. tostring(OP) .. "'") or "no op"), 0)
end
local TP_WFP32 = 0 -- [NORM_OP] 1: fp32 Gemma weights (a copy of this file with 1 here)

-- Three strategies: warp_rows (8-32 lanes per row, several rows per block,
-- shuffles only), block_row (one row per block, warps meet in shared memory)
-- and split_row (one row over a cluster of 2-8 blocks, sm_90+, for few rows).
-- A thread keeps its part of the row in registers when TP_ITEMS vectors can
-- hold it (TP_REGS=1), else re-reads it in the second pass (TP_REGS=0); one
-- of the two per configuration, so the space is threads x rows x PDL.

local function cdiv(a, b) return (a + b - 1) // b end
local ADD = TP_OP == 1 or TP_OP == 3 -- reads residual, writes z into it

local ITEMS = { 1, 2, 3, 4, 6, 8, 12, 16 } -- vectors per thread held in registers
local HELD_MAX = 128                         -- elements per thread, at most
local LANE_REACH = 32                        -- warp_rows: vectors per lane, at most

local function sms(s) return s.sms > 0 and s.sms or 132 end -- dry runs: an H200's

-- The smallest listed TP_ITEMS that holds `need` vectors, or nil.
local function items_for(need)
  for _, v in ipairs(ITEMS) do if v >= need then return v end end
  return nil
end

-- Registers a thread needs to hold `items` vectors of x/z and of w (packed
-- 16-bit; fp32 w takes twice the w half), plus ~40 for the rest.
local function regs_for(items, vec)
  local held = items * vec
  return held // 2 + (TP_WFP32 == 1 and held or held // 2) + 40
end

local function fits(items, vec, threads)
  return items ~= nil and items * vec <= HELD_MAX
     and regs_for(items, vec) <= math.min(255, 65536 // threads)
end

local pdl_needs_sm90 = { "pdl_needs_sm90", function(p, s)
  -- griddepcontrol (programmatic dependent launch) exists from Hopper on
  if p.TP_PDL == 1 and s.arch < 90 then return "TP_PDL=1 needs sm_90" end
  return true
end }

local vec_divides_h = { "vec_divides_h", function(p, s)
  -- vector loads need every row to start aligned to the vector's size
  if s.H % p.TP_VEC ~= 0 then return "H % TP_VEC ~= 0: rows would be misaligned" end
  return true
end }

local widest_vec = { "widest_vec", function(p, s)
  -- a narrower load only where H forbids the wider one (TP_VEC=1 always stays)
  if p.TP_VEC < 8 and s.H % (p.TP_VEC * 2) == 0 then return "H allows TP_VEC=" .. (p.TP_VEC * 2) end
  return true
end }

-- Register rules, given `need(p, s)` (vectors per thread) and `threads(p)`
-- (threads per block): TP_REGS=1 with the smallest TP_ITEMS that holds the
-- thread's part when registers can; TP_REGS=0 (TP_ITEMS=1, unused) otherwise.
local function register_rules(need, threads)
  return {
    { "items_match_row", function(p, s)
      local n = need(p, s)
      if p.TP_REGS == 0 then
        if p.TP_ITEMS ~= 1 then return "TP_ITEMS is unused when re-reading" end
        return true
      end
      local want = items_for(n)
      if want == nil then return n .. " vectors per thread: more than TP_ITEMS holds" end
      if p.TP_ITEMS ~= want then return "the row needs TP_ITEMS=" .. want end
      return true
    end },
    { "registers_hold_row", function(p, s)
      if p.TP_REGS == 1 and not fits(p.TP_ITEMS, p.TP_VEC, threads(p)) then
        return p.TP_ITEMS * p.TP_VEC .. " elements per thread do not fit in registers"
      end
      return true
    end },
    { "reread_only_if_spilling", function(p, s)
      -- re-reading costs a second pass over L2; only where registers cannot hold the row
      if p.TP_REGS == 0 and fits(items_for(need(p, s)), p.TP_VEC, threads(p)) then
        return "registers hold the row (TP_REGS=1)"
      end
      return true
    end },
  }
end

local function with(list, more)
  local out = {}
  for _, c in ipairs(list) do out[#out + 1] = c end
  for _, c in ipairs(more) do out[#out + 1] = c end
  return out
end

local common_params = {
  { "TP_OP",    { TP_OP } },
  { "TP_WFP32", { TP_WFP32 } },
  { "TP_VEC",   { 8, 4, 2, 1 } },
  { "TP_REGS",  { 1, 0 } },
  { "TP_ITEMS", ITEMS },
  { "TP_PDL",   { 0, 1 } },
}

local function params(first)
  return with(first, common_params)
end

local warp_rows_threads = function(p) return p.TP_THREADS_PER_ROW * p.TP_ROWS_PER_BLOCK end
local warp_rows_need = function(p, s) return cdiv(s.H // p.TP_VEC, p.TP_THREADS_PER_ROW) end
local block_row_threads = function(p) return p.TP_THREADS end
local block_row_need = function(p, s) return cdiv(s.H // p.TP_VEC, p.TP_THREADS) end
local split_row_need = function(p, s) return cdiv(cdiv(s.H // p.TP_VEC, p.TP_SPLIT), p.TP_THREADS) end

return {
  op = OP,
  strategies = {
    {
      name = "warp_rows",
      template = "norm/norm_warp_rows.cu",
      kernel = "norm_warp_rows",
      params = params({
        { "TP_THREADS_PER_ROW", { 8, 16, 32 } },
        { "TP_ROWS_PER_BLOCK",  { 1, 2, 4, 8, 16, 32 } },
      }),
      constraints = with({
        pdl_needs_sm90, vec_divides_h, widest_vec,
        { "whole_warps", function(p, s)
          -- the shuffles run over whole warps
          return warp_rows_threads(p) % 32 == 0
        end },
        { "rows_within_t", function(p, s)
          if p.TP_ROWS_PER_BLOCK > s.T then return "more rows per block than T" end
          return true
        end },
        { "block_size", function(p, s)
          -- 128 or 256 threads keep an SM full; smaller only when T leaves no choice
          local n = warp_rows_threads(p)
          if n > 256 then return "block of " .. n .. " threads > 256" end
          if n < 128 and p.TP_ROWS_PER_BLOCK * 2 <= s.T then
            return "block of " .. n .. " threads < 128 while T allows more rows"
          end
          return true
        end },
        { "lanes_within_reach", function(p, s)
          -- a row this long for so few lanes is block_row's job
          local n = warp_rows_need(p, s)
          if n > LANE_REACH then return n .. " vectors per lane > " .. LANE_REACH end
          return true
        end },
      }, register_rules(warp_rows_need, warp_rows_threads)),
      grid = function(p, s) return { cdiv(s.T, p.TP_ROWS_PER_BLOCK), 1, 1 } end,
      block = function(p, s) return { warp_rows_threads(p), 1, 1 } end,
    },
    {
      name = "block_row",
      template = "norm/norm_block_row.cu",
      kernel = "norm_block_row",
      params = params({
        { "TP_THREADS", { 64, 128, 256, 512, 1024 } },
      }),
      constraints = with({
        pdl_needs_sm90, vec_divides_h, widest_vec,
        { "threads_have_work", function(p, s)
          -- at least half the threads get a vector
          if p.TP_THREADS >= 2 * (s.H // p.TP_VEC) then return "half the threads would idle" end
          return true
        end },
      }, register_rules(block_row_need, block_row_threads)),
      grid = function(p, s) return { s.T, 1, 1 } end,
      block = function(p, s) return { p.TP_THREADS, 1, 1 } end,
    },
    {
      name = "split_row",
      template = "norm/norm_split_row.cu",
      kernel = "norm_split_row",
      params = params({
        { "TP_SPLIT",   { 2, 4, 8 } },
        { "TP_THREADS", { 64, 128, 256 } },
      }),
      constraints = with({
        { "clusters_need_sm90", function(p, s)
          if s.arch < 90 then return "thread-block clusters need sm_90" end
          return true
        end },
        pdl_needs_sm90, vec_divides_h, widest_vec,
        { "few_rows", function(p, s)
          -- with a row per SM or more, one block per row already fills the GPU
          if s.T * p.TP_SPLIT > 2 * sms(s) then return "T x TP_SPLIT > 2 blocks per SM" end
          if s.T > sms(s) // 2 then return "T > half the SMs: no split needed" end
          return true
        end },
        { "threads_have_work", function(p, s)
          if p.TP_THREADS >= 2 * cdiv(s.H // p.TP_VEC, p.TP_SPLIT) then
            return "half the threads would idle"
          end
          return true
        end },
      }, register_rules(split_row_need, block_row_threads)),
      grid = function(p, s) return { p.TP_SPLIT, s.T, 1 } end,
      block = function(p, s) return { p.TP_THREADS, 1, 1 } end,
    },
  },
  -- x read once, w once, y written once; the add ops also read residual and
  -- write z into it
  bytes = function(s)
    local welem = TP_WFP32 == 1 and 4 or s.elem
    local rows = (ADD and 4 or 2) * s.T * s.H * s.elem
    return rows + s.H * welem
  end,
}
