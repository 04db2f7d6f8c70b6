"""The calls on a GPU against an fp32 PyTorch reference, on every path the
shipped H200 table gives (tuned, bucket M=3, inferred, fallback; explain
says which, and the counters agree), through Table and torch.ops.atk; the
add ops' residual, outputs poisoned with NaN, CUDA graph replay and
torch.compile(fullgraph=True). Tolerance: relative L2 error as the tuner's
check (cache/dtype.c at_dtype_tolerance: bf16 1e-2, fp16 2e-3)."""

import pytest
import torch

import atk
import atk.ops  # noqa: F401

pytestmark = pytest.mark.gpu

BF, FP = torch.bfloat16, torch.float16
TOL = {BF: 1e-2, FP: 2e-3}

# (M, K, N, dtype, the path the shipped table gives)
GEMV_CASES = [
    (1, 2048, 2048, BF, "tuned"),
    (4, 2048, 5120, BF, "tuned"),
    (16, 2048, 12288, BF, "tuned"),
    (1, 2048, 248320, BF, "tuned"),
    (3, 2048, 2048, BF, "bucket"),
    (3, 6144, 2048, BF, "bucket"),
    (1, 2048, 4096, BF, "inferred"),
    (1, 4096, 2048, BF, "inferred"),
    (40, 2048, 2048, BF, "fallback"),
    (1, 2048, 2048, FP, "fallback"),
]
# (op, T, H, dtype, path)
NORM_CASES = [
    ("gemma_rmsnorm", 1, 2048, BF, "tuned"),
    ("gemma_rmsnorm", 3, 2048, BF, "bucket"),
    ("gemma_rmsnorm", 1, 1024, BF, "inferred"),
    ("gemma_rmsnorm", 5000, 2048, BF, "fallback"),
    ("add_gemma_rmsnorm", 8, 2048, BF, "tuned"),
    ("add_gemma_rmsnorm", 3, 2048, BF, "bucket"),
    ("add_gemma_rmsnorm", 1, 4096, BF, "inferred"),
    ("add_gemma_rmsnorm", 5000, 2048, BF, "fallback"),
    ("rmsnorm", 3, 2048, BF, "fallback"),
    ("add_rmsnorm", 3, 2048, BF, "fallback"),
    ("rmsnorm", 2, 2048, FP, "fallback"),
    ("add_rmsnorm", 2, 2048, FP, "fallback"),
]
EPS = 1e-6


def rel_err(y, ref):
    """||y - ref|| / ||ref|| in float64, inf when y has a NaN/Inf."""
    y = y.double()
    ref = ref.double()
    if not torch.isfinite(y).all():
        return float("inf")
    return ((y - ref).norm() / ref.norm()).item()


def gemv_inputs(M, K, N, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, K, dtype=dtype, device="cuda", generator=g)
    W = (torch.randn(N, K, dtype=dtype, device="cuda", generator=g) * K ** -0.5).to(dtype)
    return x, W


def norm_inputs(T, H, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(T, H, dtype=dtype, device="cuda", generator=g)
    r = torch.randn(T, H, dtype=dtype, device="cuda", generator=g)
    w = (torch.randn(H, dtype=dtype, device="cuda", generator=g) * 0.1).to(dtype)
    return x, r, w


def norm_ref(op, x, r, w):
    """(y, z) in fp32 from the rounded z = x + r (add ops; z None otherwise)."""
    z = None
    if op.startswith("add_"):
        z = (x.float() + r.float()).to(x.dtype)
        v = z.float()
    else:
        v = x.float()
    y = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + EPS)
    f = (1 + w.float()) if "gemma" in op else w.float()
    return y * f, z


def run_norm(t, op, via, x, r, w, out=None):
    if via == "table":
        fn = getattr(t, op)
        return fn(x, r, w, EPS, out=out) if op.startswith("add_") else fn(x, w, EPS, out=out)
    fn = getattr(torch.ops.atk, op)
    return fn(x, r, w, EPS, t.handle) if op.startswith("add_") else fn(x, w, EPS, t.handle)


@pytest.mark.parametrize("via", ["table", "op"])
@pytest.mark.parametrize("M,K,N,dtype,path", GEMV_CASES)
def test_gemv(gpu_table, via, M, K, N, dtype, path):
    t = gpu_table
    assert t.explain("gemv", dtype, M, K, N).path == path
    x, W = gemv_inputs(M, K, N, dtype)
    t.reset_stats()
    y = t.gemv(x, W) if via == "table" else torch.ops.atk.gemv(x, W, t.handle)
    torch.cuda.synchronize()
    assert y.shape == (M, N) and y.dtype == dtype and y.device == x.device
    err = rel_err(y, x.float() @ W.float().t())
    assert err <= TOL[dtype], f"gemv {M}x{K}x{N} {dtype} ({path}): rel. error {err:.3g}"
    s = t.stats()["gemv"]
    assert s["calls"] == 1 and s[path] == 1


@pytest.mark.parametrize("M,K,N,dtype,path", [c for c in GEMV_CASES if c[3] == BF][:9:2])
def test_gemv_overwrites_nan_out(gpu_table, M, K, N, dtype, path):
    x, W = gemv_inputs(M, K, N, dtype, seed=1)
    out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
    assert gpu_table.gemv(x, W, out=out) is out
    torch.cuda.synchronize()
    assert rel_err(out, x.float() @ W.float().t()) <= TOL[dtype]


def test_gemv_batched_leading_dims(gpu_table):
    x, W = gemv_inputs(3, 2048, 2048, BF)
    y = gpu_table.gemv(x.view(1, 3, 2048), W)
    assert y.shape == (1, 3, 2048)
    assert rel_err(y.view(3, 2048), x.float() @ W.float().t()) <= TOL[BF]


@pytest.mark.parametrize("via", ["table", "op"])
@pytest.mark.parametrize("op,T,H,dtype,path", NORM_CASES)
def test_norm(gpu_table, via, op, T, H, dtype, path):
    t = gpu_table
    assert t.explain(op, dtype, T, H).path == path
    x, r, w = norm_inputs(T, H, dtype)
    r0 = r.clone()
    ref, z = norm_ref(op, x, r0, w)
    t.reset_stats()
    y = run_norm(t, op, via, x, r, w)
    torch.cuda.synchronize()
    assert y.shape == x.shape and y.dtype == dtype
    err = rel_err(y, ref)
    assert err <= TOL[dtype], f"{op} {T}x{H} {dtype} ({path}): rel. error {err:.3g}"
    if z is not None:
        assert torch.equal(r, z), "residual must hold x + residual (rounded), written back in place"
    else:
        assert torch.equal(r, r0)
    s = t.stats()[op]
    assert s["calls"] == 1 and s[path] == 1


@pytest.mark.parametrize("op,T,H,dtype,path", [c for c in NORM_CASES if c[3] == BF])
def test_norm_overwrites_nan_out(gpu_table, op, T, H, dtype, path):
    x, r, w = norm_inputs(T, H, dtype, seed=2)
    ref, _ = norm_ref(op, x, r, w)
    out = torch.full_like(x, float("nan"))
    assert run_norm(gpu_table, op, "table", x, r, w, out=out) is out
    torch.cuda.synchronize()
    assert rel_err(out, ref) <= TOL[dtype]


def test_wrong_gpu_or_cpu_tensors_are_refused(gpu_table):
    x, W = gemv_inputs(1, 2048, 2048, BF)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        gpu_table.gemv(x.cpu(), W.cpu())
    with pytest.raises(ValueError, match="W is on cpu"):
        gpu_table.gemv(x, W.cpu())
    if torch.cuda.device_count() > 1:
        with pytest.raises(ValueError, match="the table on cuda:"):
            gpu_table.gemv(x.to("cuda:1"), W.to("cuda:1"))


def _step(t, x, r, w, W, Wbig):
    """One decode-like step: fused add+norm, a tuned GEMV, a fallback (cuBLAS) GEMV."""
    h = t.add_gemma_rmsnorm(x, r, w, EPS)
    y = torch.ops.atk.gemv(h, W, t.handle)
    big = t.gemv(torch.cat([h] * 40), Wbig) if Wbig is not None else None
    return y, big


@pytest.mark.parametrize("with_fallback", [False, True])
def test_cuda_graph_replay(gpu_table, with_fallback):
    t = gpu_table
    x, r, w = norm_inputs(1, 2048, BF, seed=3)
    _, W = gemv_inputs(1, 2048, 2048, BF, seed=4)
    Wbig = W if with_fallback else None
    # warm up on a side stream (cuBLAS initialises itself and loads its kernel eagerly)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            _step(t, x, r.clone(), w, W, Wbig)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y, big = _step(t, x, r, w, W, Wbig)

    for seed in (5, 6):
        xn, rn, _ = norm_inputs(1, 2048, BF, seed=seed)
        x.copy_(xn)
        r.copy_(rn)
        g.replay()
        torch.cuda.synchronize()
        r_e = rn.clone()
        y_e, big_e = _step(t, xn, r_e, w, W, Wbig)
        torch.cuda.synchronize()
        assert torch.equal(r, r_e), "replayed residual write-back"
        assert rel_err(y, y_e.float()) <= TOL[BF]
        ref, _ = norm_ref("add_gemma_rmsnorm", xn, rn, w)
        assert rel_err(y, ref.to(BF).float() @ W.float().t()) <= 2 * TOL[BF]
        if with_fallback:
            assert rel_err(big, big_e.float()) <= TOL[BF]


def test_torch_compile_fullgraph(gpu_table):
    t = gpu_table
    h = t.handle

    def f(x, r, w, W):
        n = torch.ops.atk.add_gemma_rmsnorm(x, r, w, EPS, h)
        return torch.ops.atk.gemv(n, W, h) * 2 + 1

    x, r, w = norm_inputs(3, 2048, BF, seed=7)
    _, W = gemv_inputs(3, 2048, 5120, BF, seed=8)
    r_e = r.clone()
    want = f(x, r_e, w, W)
    cf = torch.compile(f, fullgraph=True)
    got = cf(x, r, w, W)
    torch.cuda.synchronize()
    assert torch.equal(r, r_e), "the compiled graph must keep the residual write-back"
    assert rel_err(got, want.float()) <= TOL[BF]


def gemv_add_tables(gpu_table):
    """The shipped table (no gemv_add entries: the cuBLAS beta=1 fallback)
    and, when ATK_TEST_GEMV_ADD_DB names a cache with gemv_add tuned on this
    GPU, that one too."""
    import os
    yield gpu_table
    path = os.environ.get("ATK_TEST_GEMV_ADD_DB")
    if path:
        with atk.open(path) as t:
            yield t


@pytest.mark.parametrize("M,K,N", [(1, 2048, 2048), (3, 2048, 2048), (1, 6144, 2048), (16, 6144, 2048)])
def test_gemv_add(gpu_table, M, K, N):
    for t in gemv_add_tables(gpu_table):
        c = t.explain("gemv_add", BF, M, K, N)
        x, W = gemv_inputs(M, K, N, BF, seed=2)
        r0 = torch.randn(M, N, dtype=BF, device="cuda")
        ref = (r0.float() + (x.float() @ W.float().t()).to(BF).float())  # rne(r + rne(x . W^T)) before rounding
        for via in ("table", "op"):
            r = r0.clone()
            t.reset_stats()
            if via == "table":
                assert t.gemv_add(x, W, r) is r
            else:
                assert torch.ops.atk.gemv_add(x, W, r, t.handle) is None
            torch.cuda.synchronize()
            err = rel_err(r, ref)
            assert err <= TOL[BF], f"gemv_add {M}x{K}x{N} ({c.path} {c.strategy}, {via}): rel. error {err:.3g}"
            assert t.stats()["gemv_add"][c.path] == 1
