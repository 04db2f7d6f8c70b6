-- qwen3.5-4b.lua — the decode kernels of Qwen3.5-4B (hidden 2560,
-- intermediate 9216, vocab 248320), for `autotune --suite`: every GEMV at
-- M = 1, 2, 4, 8, 16 tokens and the model's RMSNorms (the Gemma form,
-- y = x * r * (1 + w), plain and fused with the residual add). Shapes from
-- the model config; GEMV shapes are MxKxN (K inputs, N outputs), norms TxH.

local M = {1, 2, 4, 8, 16}                  -- decode tokens per step
local T = {1, 2, 4, 8, 16, 128, 512, 4096}  -- norm rows: decode, then prefill chunks
local H = 2560

-- "2048x5120" -> {"1x2048x5120", "2x2048x5120", ...}
local function each_m(kn)
  local t = {}
  for i, m in ipairs(M) do t[i] = m .. "x" .. kn end
  return t
end

-- 2048 -> {"1x2048", "2x2048", ...}
local function each_t(h)
  local t = {}
  for i, rows in ipairs(T) do t[i] = rows .. "x" .. h end
  return t
end

return {
  name = "qwen3.5-4b",
  dtype = "bf16",
  entries = {
    tune("gemv", each_m "2560x10240",  "attn q/k/v + gate"),
    tune("gemv", each_m "4096x2560",   "attn o, linear-attn out"),
    tune("gemv", each_m "2560x12288",  "linear-attn in_proj_qkvz"),
    tune("gemv", each_m "2560x64",     "linear-attn in_proj_ba"),
    tune("gemv", each_m "2560x18432",  "MLP gate_up"),
    tune("gemv", each_m "9216x2560",   "MLP down"),
    tune("gemv", each_m "2560x248320", "lm_head"),
    tune("gemma_rmsnorm",     each_t(H), "input norm of layer 0, final norm"),
    tune("add_gemma_rmsnorm", each_t(H), "residual add + input/post-attention norm"),
  },
}
