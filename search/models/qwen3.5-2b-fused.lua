-- qwen3.5-2b-fused.lua — the fused decode ops of Qwen3.5-2B at the shapes the
-- decode engine's mode 4 calls (examples/decode: the Gemma RMSNorm in the
-- GEMV's prologue, SwiGLU and the residual add in its epilogue), for
-- `autotune --suite`, at M = 1, 2, 4, 8, 16 tokens ("1..16x...", the batch
-- buckets, as --shape takes them). Shapes are MxKxN: K the hidden size the
-- norm runs over, N the outputs (for SwiGLU the intermediate size: the gate
-- and up weights are [N, K] each). The unfused sequences these
-- ops are held against (the tuned gemma_rmsnorm and gemv of qwen3.5-2b.lua)
-- are tuned by each fused entry first when the cache lacks them. Kept apart
-- from qwen3.5-2b.lua so that suite serves modes 1-3 whatever this one needs.

return {
  name = "qwen3.5-2b-fused",
  dtype = "bf16",
  entries = {
    tune("gemma_rmsnorm_gemv", "1..16x2048x5120",   "input norm + attn q/k/v + gate"),
    tune("gemma_rmsnorm_gemv", "1..16x2048x8192",   "input norm + linear-attn in_proj_qkvz"),
    tune("gemma_rmsnorm_gemv", "1..16x2048x32",     "input norm + linear-attn in_proj_ba"),
    tune("gemma_rmsnorm_gemv", "1..16x2048x8224",   "input norm + in_proj_qkvz|ba, one weight (examples/decode)"),
    tune("gemma_rmsnorm_gemv", "1..16x2048x248320", "final norm + lm_head"),
    tune("gemma_rmsnorm_gemv_swiglu", "1..16x2048x6144", "post-attention norm + MLP gate_up + SwiGLU"),
    tune("gemv_add", "1..16x2048x2048", "attn o / linear-attn out + residual add"),
    tune("gemv_add", "1..16x6144x2048", "MLP down + residual add"),
    -- the residual-add form, for an engine that adds before the norm
    -- (o_proj and down_proj as plain GEMVs): z = x + residual written back
    tune("add_gemma_rmsnorm_gemv", "1x2048x12288", "residual add + post-attention norm + MLP gate_up"),
    tune("add_gemma_rmsnorm_gemv", "1x2048x5120",  "residual add + input norm + attn q/k/v + gate"),
    tune("add_gemma_rmsnorm_gemv", "1x2048x8192",  "residual add + input norm + linear-attn in_proj_qkvz"),
  },
}
