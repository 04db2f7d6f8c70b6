"""The fused decode ops on a GPU against a float64 reference that rounds
where the unfused sequence rounds (xn, g, u to the dtype): through Table
and torch.ops.atk, SwiGLU with two weights and with one concatenated
[2N, K] weight (views W[:N], W[N:]), out poisoned with NaN, a caller's
scratch, CUDA graph replay. The residual-add forms against the unfused
sequence: residual becomes rne(x + residual) bit for bit, y is the norm
GEMV of that; M up to 64 (the fused kernels) and 65..70 (always the
unfused sequence), one scratch over calls in a row (its counters left
zero), a graph replayed. The shipped table has no fused entries: these
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
ADD = ("add_rmsnorm_gemv", "add_gemma_rmsnorm_gemv")
COUNTERS = 256  # ATK_FUSED_COUNTER_BYTES: zero before the first call, zero after every call
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


# the add forms: K a multiple of 8 (16-byte rows), not of 64; N odd-ish;
# M = 65..70 is past the fused kernels' 64 tokens: the unfused sequence
ADD_SHAPES = [(1, 1096, 1000), (3, 1096, 1000), (16, 1096, 1000), (3, 2048, 2048)] + \
    [(M, 1096, 1000) for M in range(65, 71)]


def add_inputs(M, K, N, dtype, seed=0):
    """x, residual [M, K], w [K], W [N, K]: residual of a size like the
    residual stream's, x like an attention output."""
    x, w, Wgu = inputs(M, K, N, dtype, seed)
    g = torch.Generator(device="cuda").manual_seed(seed + 1000)
    r = (torch.randn(M, K, device="cuda", generator=g) * 4).to(dtype)
    return x, r, w, Wgu[:N].clone()


def add_reference(op, x, residual, w, W):
    """The unfused sequence: z = rne(x + residual), then y of the norm GEMV
    of z (float64, xn rounded as the norm stores it). Returns (z, y)."""
    z = (x.float() + residual.float()).to(x.dtype)
    return z, reference(op[len("add_"):], z, w, W, None)


def add_run(t, op, via, x, residual, w, W, out=None, scratch=None):
    if via == "op":
        return getattr(torch.ops.atk, op)(x, residual, w, W, EPS, t.handle)
    return getattr(t, op)(x, residual, w, W, EPS, out=out, scratch=scratch)


def same_bits(a, b):
    return a.shape == b.shape and torch.equal(a.view(torch.int16), b.view(torch.int16))


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


@pytest.mark.parametrize("via", ["table", "op"])
@pytest.mark.parametrize("M,K,N", ADD_SHAPES)
@pytest.mark.parametrize("op", ADD)
def test_add_fused(gpu_table, op, M, K, N, via):
    for t in tables(gpu_table):
        x, r, w, W = add_inputs(M, K, N, BF, seed=M)
        z, ref = add_reference(op, x, r, w, W)
        c = t.explain(op, BF, M, K, N)
        t.reset_stats()
        x0 = x.clone()
        y = add_run(t, op, via, x, r, w, W)
        torch.cuda.synchronize()
        assert y.shape == (M, N) and y.dtype == BF
        assert same_bits(r, z), f"{op} {M}x{K}x{N} ({c.path} {c.strategy}, {via}): residual != rne(x + residual)"
        assert same_bits(x, x0)  # x is only read
        err = rel_err(y, ref)
        assert err <= TOL[BF], f"{op} {M}x{K}x{N} ({c.path} {c.strategy}, {via}): rel. error {err:.3g}"
        s = t.stats()
        assert s[op]["calls"] == 1 and s[op][c.path] == 1
        assert s["gemv"]["calls"] == 0 and s["add_rmsnorm"]["calls"] == 0 and s["add_gemma_rmsnorm"]["calls"] == 0


@pytest.mark.parametrize("M", [3, 16, 66])
@pytest.mark.parametrize("op", ADD)
def test_add_fused_scratch_in_a_row(gpu_table, op, M):
    # one caller's scratch, counters zeroed once and the rest poisoned,
    # serving the add form, another fused op, and the add form again: each
    # add call sees the residual the last one wrote, the counters stay zero
    K, N = 1096, 1000
    for t in tables(gpu_table):
        x, r, w, W = add_inputs(M, K, N, FP, seed=7)
        x2, _, _, _ = add_inputs(M, K, N, FP, seed=8)
        _, _, Wgu = inputs(M, K, N, FP, seed=9)
        need = max(t.scratch_bytes(op, FP, M, K, N), t.scratch_bytes("gemv_swiglu", FP, M, K, N))
        scratch = torch.full((need + 4096,), 0xFF, dtype=torch.uint8, device="cuda")
        scratch[:COUNTERS].zero_()
        out = torch.full((M, N), float("nan"), dtype=FP, device="cuda")
        z1, ref1 = add_reference(op, x, r, w, W)
        assert add_run(t, op, "table", x, r, w, W, out=out, scratch=scratch) is out
        torch.cuda.synchronize()
        assert same_bits(r, z1) and rel_err(out, ref1) <= TOL[FP]
        g = t.gemv_swiglu(z1, Wgu[:N], Wgu[N:], scratch=scratch)
        torch.cuda.synchronize()
        assert rel_err(g, reference("gemv_swiglu", z1, None, Wgu[:N], Wgu[N:])) <= TOL[FP]
        z2, ref2 = add_reference(op, x2, r, w, W)
        out.fill_(float("nan"))
        add_run(t, op, "table", x2, r, w, W, out=out, scratch=scratch)
        torch.cuda.synchronize()
        assert same_bits(r, z2) and rel_err(out, ref2) <= TOL[FP]
        assert not scratch[:COUNTERS].any(), "a call left a counter non-zero"


@pytest.mark.parametrize("op", ADD)
def test_add_fused_cuda_graph(gpu_table, op):
    # a captured add form replayed: each replay adds into the residual it
    # finds and leaves the scratch's counters zero for the next
    t = gpu_table
    M, K, N = 1, 2048, 6144
    x, r, w, W = add_inputs(M, K, N, BF, seed=10)
    scratch = torch.zeros(t.scratch_bytes(op, BF, M, K, N), dtype=torch.uint8, device="cuda")
    out = torch.empty(M, N, dtype=BF, device="cuda")
    r_save = r.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up: cuBLAS loads its kernels eagerly
        for _ in range(2):
            add_run(t, op, "table", x, r, w, W, out=out, scratch=scratch)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        add_run(t, op, "table", x, r, w, W, out=out, scratch=scratch)
    r.copy_(r_save)
    for seed in (11, 12):
        xn, _, _, _ = add_inputs(M, K, N, BF, seed=seed)
        x.copy_(xn)
        z, ref = add_reference(op, xn, r.clone(), w, W)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert same_bits(r, z) and rel_err(out, ref) <= TOL[BF]
    assert not scratch[:COUNTERS].any()
