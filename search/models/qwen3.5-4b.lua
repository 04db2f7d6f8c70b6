-- qwen3.5-4b.lua — the decode kernels of Qwen3.5-4B (hidden 2560,
-- intermediate 9216, vocab 248320), for `autotune --suite`: every GEMV at
-- M = 1, 2, 4, 8, 16 tokens and the model's RMSNorms (the Gemma form,
-- y = x * r * (1 + w), plain and fused with the residual add). Shapes from
-- the model config; GEMV shapes are MxKxN (K inputs, N outputs), norms TxH;
-- "1..16x..." is the batch buckets M (or T) = 1, 2, 4, 8, 16, as --shape takes it.

return {
  name = "qwen3.5-4b",
  dtype = "bf16",
  entries = {
    tune("gemv", "1..16x2560x10240",  "attn q/k/v + gate"),
    tune("gemv", "1..16x4096x2560",   "attn o, linear-attn out"),
    tune("gemv", "1..16x2560x12288",  "linear-attn in_proj_qkvz"),
    tune("gemv", "1..16x2560x64",     "linear-attn in_proj_ba"),
    tune("gemv", "1..16x2560x18432",  "MLP gate_up"),
    tune("gemv", "1..16x9216x2560",   "MLP down"),
    tune("gemv", "1..16x2560x248320", "lm_head"),
    -- norm rows: the decode buckets, then prefill chunks
    tune("gemma_rmsnorm",     {"1..16x2560", "128x2560", "512x2560", "4096x2560"}, "input norm of layer 0, final norm"),
    tune("add_gemma_rmsnorm", {"1..16x2560", "128x2560", "512x2560", "4096x2560"},
         "residual add + input/post-attention norm"),
  },
}
