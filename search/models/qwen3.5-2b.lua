-- qwen3.5-2b.lua — the decode kernels of Qwen3.5-2B (hidden 2048, 24 layers,
-- intermediate 6144, vocab 248320), for `autotune --suite`: every GEMV at
-- M = 1, 2, 4, 8, 16 tokens and the model's RMSNorms (the Gemma form,
-- y = x * r * (1 + w), plain and fused with the residual add). Shapes from
-- the model config; GEMV shapes are MxKxN (K inputs, N outputs), norms TxH;
-- "1..16x..." is the batch buckets M (or T) = 1, 2, 4, 8, 16, as --shape takes it.

return {
  name = "qwen3.5-2b",
  dtype = "bf16",
  entries = {
    tune("gemv", "1..16x2048x5120",   "attn q/k/v + gate"),
    tune("gemv", "1..16x2048x2048",   "attn o, linear-attn out"),
    tune("gemv", "1..16x2048x8192",   "linear-attn in_proj_qkvz"),
    tune("gemv", "1..16x2048x32",     "linear-attn in_proj_ba"),
    tune("gemv", "1..16x2048x8224",   "linear-attn in_proj_qkvz|ba, one weight (examples/decode)"),
    tune("gemv", "1..16x2048x12288",  "MLP gate_up"),
    tune("gemv", "1..16x6144x2048",   "MLP down"),
    tune("gemv", "1..16x2048x248320", "lm_head"),
    -- norm rows: the decode buckets, then prefill chunks
    tune("gemma_rmsnorm",     {"1..16x2048", "128x2048", "512x2048", "4096x2048"}, "input norm of layer 0, final norm"),
    tune("add_gemma_rmsnorm", {"1..16x2048", "128x2048", "512x2048", "4096x2048"},
         "residual add + input/post-attention norm"),
  },
}
