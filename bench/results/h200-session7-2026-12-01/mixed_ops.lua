-- mixed_ops.lua — a suite whose entries share no kernels (each op's
-- templates, and the dtype, are compile options), so each entry compiles its
-- own NVRTC programs. Compile-ahead can overlap each compile with the entry
-- before it on the GPU, which the Qwen suites (83% of candidates already from
-- the cubin cache) cannot show.
return {
  name = "mixed-ops",
  entries = {
    tune("gemv", "1x2048x5120", { dtype = "bf16" }),
    tune("rmsnorm", "1x2048", { dtype = "bf16" }),
    tune("gemv", "1x2048x5120", { dtype = "fp16" }),
    tune("add_rmsnorm", "1x2048", { dtype = "bf16" }),
    tune("gemma_rmsnorm", "1x2048", { dtype = "fp16" }),
    tune("add_gemma_rmsnorm", "1x2048", { dtype = "fp16" }),
    tune("rmsnorm", "1x2048", { dtype = "fp16" }),
    tune("add_rmsnorm", "1x2048", { dtype = "fp16" }),
  },
}
