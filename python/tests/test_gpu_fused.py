"""The fused decode ops on a GPU against a float64 reference that rounds
where the unfused sequence rounds (xn, g, u to the dtype): through Table
and torch.ops.atk, SwiGLU with two weights and with one concatenated
[2N, K] weight (views W[:N], W[N:]), out poisoned with NaN, a caller's
scratch, CUDA graph replay. The shipped table has no fused entries: these
run the unfused fallback; ATK_TEST_FUSED_DB, a cache with fused entries
tuned on this GPU, is run too."""

import os

import pytest
import torch

import atk
import atk.ops  # noqa: F401

pytestmark = pytest.mark.gpu

BF, FP = torch.bfloat16, torch.float16
TOL = {BF: 1e-2, FP: 2e-3}
EPS = 1e-6
FUSED = ("rmsnorm_gemv", "gemma_rmsnorm_gemv", "gemv_swiglu", "rmsnorm_gemv_swiglu", "gemma_rmsnorm_gemv_swiglu")
# awkward sizes: K not a multiple of 64, N odd
SHAPES = [(1, 1096, 1000), (3, 1096, 1000), (1, 2048, 6144), (5, 2048, 2048)]


def tables(gpu_table):
    yield gpu_table
    path = os.environ.get("ATK_TEST_FUSED_DB")
    if path:
        with atk.open(path) as t:
            yield t


def inputs(M, K, N, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, K, dtype=dtype, device="cuda", generator=g)
    w = (torch.randn(K, dtype=dtype, device="cuda", generator=g) * 0.1 + 1).to(dtype)
    Wgu = (torch.randn(2 * N, K, dtype=dtype, device="cuda", generator=g) * K ** -0.5).to(dtype)
    return x, w, Wgu


def reference(op, x, w, Wg, Wu):
    """float64, rounded to x's dtype where the unfused sequence stores."""
    dt = x.dtype
    if "rmsnorm" in op:
        v = x.float()
        r = torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + EPS)
        f = (1 + w.float()) if op.startswith("gemma") else w.float()
        x = ((v * r) * f).to(dt)
    if "swiglu" not in op:
        return x.double() @ Wg.double().t()
    g = (x.double() @ Wg.double().t()).to(dt).double()
    u = (x.double() @ Wu.double().t()).to(dt).double()
    return g / (1 + torch.exp(-g)) * u


def run(t, op, via, x, w, Wg, Wu, out=None, scratch=None):
    if via == "op":
        fn = getattr(torch.ops.atk, op)
        if op == "gemv_swiglu":
            return fn(x, Wg, Wu, t.handle)
        return fn(x, w, Wg, Wu, EPS, t.handle) if op.endswith("swiglu") else fn(x, w, Wg, EPS, t.handle)
    fn = getattr(t, op)
    if op == "gemv_swiglu":
        return fn(x, Wg, Wu, out=out, scratch=scratch)
    if op.endswith("swiglu"):
        return fn(x, w, Wg, Wu, EPS, out=out, scratch=scratch)
    return fn(x, w, Wg, EPS, out=out, scratch=scratch)


def rel_err(y, ref):
    if not torch.isfinite(y).all():
        return float("inf")
    return ((y.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("via", ["table", "op"])
@pytest.mark.parametrize("M,K,N", SHAPES)
@pytest.mark.parametrize("op", FUSED)
def test_fused(gpu_table, op, M, K, N, via):
    for t in tables(gpu_table):
        x, w, Wgu = inputs(M, K, N, BF)
        forms = [("two", Wgu[:N].clone(), Wgu[N:].clone())]
        if op.endswith("swiglu"):
            forms.append(("concatenated", Wgu[:N], Wgu[N:]))  # Wu == Wg + N*K
        for form, Wg, Wu in forms:
            c = t.explain(op, BF, M, K, N)
            ref = reference(op, x, w, Wg, Wu)
            t.reset_stats()
            y = run(t, op, via, x, w, Wg, Wu if op.endswith("swiglu") else None)
            torch.cuda.synchronize()
            assert y.shape == (M, N) and y.dtype == BF
            err = rel_err(y, ref)
            assert err <= TOL[BF], f"{op} {M}x{K}x{N} {form} ({c.path} {c.strategy}, {via}): rel. error {err:.3g}"
            s = t.stats()
            assert s[op]["calls"] == 1 and s[op][c.path] == 1
            assert s["gemv"]["calls"] == 0 and s["rmsnorm"]["calls"] == 0


@pytest.mark.parametrize("op", FUSED)
def test_fused_nan_out_and_scratch(gpu_table, op):
    M, K, N = 2, 1096, 1000
    x, w, Wgu = inputs(M, K, N, FP, seed=3)
    Wg, Wu = Wgu[:N], Wgu[N:]
    ref = reference(op, x, w, Wg, Wu)
    out = torch.full((M, N), float("nan"), dtype=FP, device="cuda")
    scratch = torch.full((gpu_table.scratch_bytes(op, FP, M, K, N) + 4096,), 0xFF, dtype=torch.uint8, device="cuda")
    assert run(gpu_table, op, "table", x, w, Wg, Wu, out=out, scratch=scratch) is out
    torch.cuda.synchronize()
    assert rel_err(out, ref) <= TOL[FP]


def test_fused_cuda_graph(gpu_table):
    t = gpu_table
    M, K, N = 1, 2048, 6144
    x, w, Wgu = inputs(M, K, N, BF, seed=4)
    scratch = torch.empty(t.scratch_bytes("rmsnorm_gemv_swiglu", BF, M, K, N), dtype=torch.uint8, device="cuda")
    out = torch.empty(M, N, dtype=BF, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up: cuBLAS loads its kernels eagerly
        for _ in range(2):
            t.rmsnorm_gemv_swiglu(x, w, Wgu[:N], Wgu[N:], EPS, out=out, scratch=scratch)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        t.rmsnorm_gemv_swiglu(x, w, Wgu[:N], Wgu[N:], EPS, out=out, scratch=scratch)
    for seed in (5, 6):
        xn, _, _ = inputs(M, K, N, BF, seed=seed)
        x.copy_(xn)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert rel_err(out, reference("rmsnorm_gemv_swiglu", xn, w, Wgu[:N], Wgu[N:])) <= TOL[BF]
