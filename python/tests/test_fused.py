"""The fused decode ops without a GPU (a dry table, meta tensors): Table
calls return y's shape, count in their own op's counters, name a bad
argument (shape, dtype, scratch size; the add forms' residual: shape,
dtype, layout, sharing memory with another argument); scratch_bytes with
its 256 counter bytes; the torch.ops.atk schemas (the add forms' residual
written in place) and fake kernels; torch.compile(fullgraph=True) tracing
them."""

import pytest
import torch

import atk
import atk.ops  # noqa: F401

BF = torch.bfloat16
ADD = ("add_rmsnorm_gemv", "add_gemma_rmsnorm_gemv")
FUSED = ("rmsnorm_gemv", "gemma_rmsnorm_gemv", "gemv_swiglu", "rmsnorm_gemv_swiglu", "gemma_rmsnorm_gemv_swiglu") + ADD
COUNTERS = 256  # ATK_FUSED_COUNTER_BYTES


def meta(*shape, dtype=BF):
    return torch.empty(*shape, dtype=dtype, device="meta")


def call(t, op, x, K, N, **kw):
    """One call of op through Table with meta weights of [N, K]."""
    w, W, Wu = meta(K), meta(N, K), meta(N, K)
    fn = getattr(t, op)
    if op in ADD:
        return fn(x, meta(*x.shape), w, W, 1e-6, **kw)
    if op == "gemv_swiglu":
        return fn(x, W, Wu, **kw)
    if op.endswith("swiglu"):
        return fn(x, w, W, Wu, 1e-6, **kw)
    return fn(x, w, W, 1e-6, **kw)


@pytest.mark.parametrize("op", FUSED)
def test_call_shape_and_own_counter(dry, op):
    dry.reset_stats()
    y = call(dry, op, meta(2, 3, 2048), 2048, 96)
    assert y.shape == (2, 3, 96) and y.dtype == BF and y.device.type == "meta"
    out = meta(1, 96)
    assert call(dry, op, meta(1, 2048), 2048, 96, out=out) is out
    s = dry.stats()
    assert s[op]["calls"] == 2 and s[op]["fallback"] == 2  # the shipped table has no fused entries
    assert s["gemv"]["calls"] == 0 and s["rmsnorm"]["calls"] == 0 and s["gemma_rmsnorm"]["calls"] == 0
    c = dry.explain(op, "bf16", 1, 2048, 96)
    assert c.path == "fallback" and c.strategy == "unfused" and c.kernel == ""


def test_meta_views_at_an_offset_plan_as_null(dry):
    # a concatenated gate_up weight passed as its halves: on meta tensors the
    # up half's data_ptr is its offset alone, not an address; the dry call
    # still plans (every pointer NULL) instead of naming "NULL x"
    dry.reset_stats()
    W = meta(2 * 96, 2048)
    assert W[96:].data_ptr() != 0
    y = dry.gemma_rmsnorm_gemv_swiglu(meta(1, 2048), meta(2048), W[:96], W[96:], 1e-6)
    assert y.shape == (1, 96) and dry.stats()["gemma_rmsnorm_gemv_swiglu"]["calls"] == 1


def test_scratch_bytes(dry):
    # the counters, then xn [M, K], then g and u [M, N] each, each rounded up to 256 bytes
    assert dry.scratch_bytes("rmsnorm_gemv", "bf16", 3, 2048, 2048) == COUNTERS + 12288
    assert dry.scratch_bytes("gemv_swiglu", BF, 1, 2048, 6144) == COUNTERS + 24576
    assert dry.scratch_bytes("rmsnorm_gemv_swiglu", "fp16", 1, 100, 10) == COUNTERS + 768
    assert dry.scratch_bytes("add_rmsnorm_gemv", "bf16", 3, 2048, 2048) == COUNTERS + 12288
    assert dry.scratch_bytes("add_gemma_rmsnorm_gemv", "fp16", 1, 100, 10) == COUNTERS + 256
    assert dry.scratch_bytes("gemv", "bf16", 1, 2048, 2048) == 0
    assert dry.scratch_bytes("add_rmsnorm", "bf16", 1, 2048, 2048) == 0
    for op in FUSED:
        assert dry.scratch_bytes(op, "bf16", 1, 8, 8) >= COUNTERS + 256, op


def test_bad_arguments_are_named(dry):
    x = meta(1, 2048)
    with pytest.raises(ValueError, match=r"x has K=2048 columns, W \[N=8, K=1024\]"):
        dry.rmsnorm_gemv(x, meta(2048), meta(8, 1024))
    with pytest.raises(ValueError, match="w has 1024 elements"):
        dry.rmsnorm_gemv(x, meta(1024), meta(8, 2048))
    with pytest.raises(ValueError, match=r"Wu must have Wg's shape \(8, 2048\)"):
        dry.gemv_swiglu(x, meta(8, 2048), meta(16, 2048))
    with pytest.raises(TypeError, match="Wu is torch.float16"):
        dry.gemv_swiglu(x, meta(8, 2048), meta(8, 2048, dtype=torch.float16))
    with pytest.raises(ValueError, match="Wg must have 2 dimension"):
        dry.rmsnorm_gemv_swiglu(x, meta(2048), meta(2048), meta(8, 2048))
    with pytest.raises(ValueError, match=f"scratch has 100 bytes, the call needs {COUNTERS + 8192}"):
        dry.gemv_swiglu(x, meta(2048, 2048), meta(2048, 2048), scratch=torch.empty(100, dtype=torch.uint8,
                                                                                     device="meta"))
    with pytest.raises(TypeError, match="scratch must be a torch.Tensor"):
        dry.gemv_swiglu(x, meta(8, 2048), meta(8, 2048), scratch=1234)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        dry.rmsnorm_gemv(torch.zeros(1, 64, dtype=BF), torch.zeros(64, dtype=BF), torch.zeros(8, 64, dtype=BF))


def test_add_forms_residual_is_checked(dry):
    x, w, W = meta(2, 3, 2048), meta(2048), meta(96, 2048)
    for op in ADD:
        fn = getattr(dry, op)
        with pytest.raises(ValueError, match=rf"atk.{op}: residual has shape \(6, 2048\), x \(2, 3, 2048\)"):
            fn(x, meta(6, 2048), w, W)
        with pytest.raises(TypeError, match=f"atk.{op}: residual is torch.float16, x is torch.bfloat16"):
            fn(x, meta(2, 3, 2048, dtype=torch.float16), w, W)
        with pytest.raises(TypeError, match=f"atk.{op}: residual must be bfloat16 or float16"):
            fn(x, meta(2, 3, 2048, dtype=torch.float32), w, W)
        with pytest.raises(TypeError, match=f"atk.{op}: residual must be a torch.Tensor"):
            fn(x, None, w, W)
        with pytest.raises(ValueError, match=f"atk.{op}: residual must be contiguous"):
            fn(meta(3, 2048), meta(2048, 3).t(), w, W)
        with pytest.raises(ValueError, match=f"atk.{op}: residual shares memory with x"):
            fn(x, x, w, W)
        with pytest.raises(ValueError, match=f"atk.{op}: residual shares memory with x"):
            fn(x, x.view(2, 3, 2048), w, W)  # another view of x's storage
        buf = meta(2, 2048)
        with pytest.raises(ValueError, match=f"atk.{op}: residual shares memory with out"):
            fn(meta(1, 2048), buf[:1], w, meta(2048, 2048), out=buf[:1])
        big = meta(2, 2048)
        with pytest.raises(ValueError, match=f"atk.{op}: residual shares memory with W"):
            fn(meta(1, 2048), big[1:], w, big)
        with pytest.raises(ValueError, match="must be a CUDA tensor"):
            fn(torch.zeros(1, 64, dtype=BF), torch.zeros(1, 64, dtype=BF), torch.zeros(64, dtype=BF),
               torch.zeros(8, 64, dtype=BF))
    # disjoint halves of one buffer are two tensors as far as atk is concerned
    dry.reset_stats()
    buf = meta(2, 2048)
    assert dry.add_rmsnorm_gemv(buf[:1], buf[1:], w, W).shape == (1, 96)
    assert dry.stats()["add_rmsnorm_gemv"]["calls"] == 1


def test_add_forms_count_alone_and_plan(dry):
    # a dry call plans without reading anything: only its own op's counters
    # move, not add_rmsnorm's or gemv's (the unfused sequence counts under the
    # fused op's name), at M <= 64 and above (always the unfused sequence);
    # a caller's scratch of the right size is taken, a smaller one refused
    K, N = 2048, 96
    for op in ADD:
        dry.reset_stats()
        for M in (1, 3, 16, 64, 65, 70):
            s = torch.zeros(dry.scratch_bytes(op, BF, M, K, N), dtype=torch.uint8, device="meta")
            y = getattr(dry, op)(meta(M, K), meta(M, K), meta(K), meta(N, K), 1e-5, scratch=s)
            assert y.shape == (M, N)
        st = dry.stats()
        assert st[op]["calls"] == 6 and st[op]["fallback"] == 6 and sum(st[o]["calls"] for o in st) == 6
        M = 3
        with pytest.raises(ValueError, match=f"scratch has {COUNTERS} bytes, the call needs"):
            getattr(dry, op)(meta(M, K), meta(M, K), meta(K), meta(N, K),
                             scratch=torch.zeros(COUNTERS, dtype=torch.uint8, device="meta"))


def test_op_schemas_and_fakes():
    for name in FUSED:
        s = getattr(torch.ops.atk, name).default._schema
        assert s.arguments[-1].name == "table" and len(s.returns) == 1
        written = [a.name for a in s.arguments if a.alias_info is not None and a.alias_info.is_write]
        assert written == (["residual"] if name in ADD else []), name
        if name in ADD:
            assert [a.name for a in s.arguments] == ["x", "residual", "w", "W", "eps", "table"]
    x, w, W = meta(3, 64), meta(64), meta(7, 64)
    assert torch.ops.atk.rmsnorm_gemv(x, w, W, 1e-6, 0).shape == (3, 7)
    assert torch.ops.atk.gemma_rmsnorm_gemv(x, w, W, 1e-6, 0).shape == (3, 7)
    assert torch.ops.atk.gemv_swiglu(x, W, W, 0).shape == (3, 7)
    assert torch.ops.atk.rmsnorm_gemv_swiglu(x, w, W, W, 1e-6, 0).shape == (3, 7)
    assert torch.ops.atk.gemma_rmsnorm_gemv_swiglu(x, w, W, W, 1e-6, 0).shape == (3, 7)
    r = meta(3, 64)
    assert torch.ops.atk.add_rmsnorm_gemv(x, r, w, W, 1e-6, 0).shape == (3, 7)
    y = torch.ops.atk.add_gemma_rmsnorm_gemv(meta(2, 5, 64), meta(2, 5, 64), w, W, 1e-6, 0)
    assert y.shape == (2, 5, 7) and y.dtype == BF
    with pytest.raises(Exception, match="K must equal"):
        torch.ops.atk.add_rmsnorm_gemv(meta(3, 32), meta(3, 32), w, W, 1e-6, 0)
    with pytest.raises(Exception, match="residual must have x's shape"):
        torch.ops.atk.add_gemma_rmsnorm_gemv(x, meta(4, 64), w, W, 1e-6, 0)
    with pytest.raises(Exception, match="K must equal"):
        torch.ops.atk.gemv_swiglu(meta(3, 32), W, W, 0)


def test_compile_fullgraph_traces_fused_ops():
    def f(x, w, Wg, Wu, Wd):
        a = torch.ops.atk.gemma_rmsnorm_gemv_swiglu(x, w, Wg, Wu, 1e-6, 0)
        return torch.ops.atk.gemv(a, Wd, 0)

    g = torch.compile(f, fullgraph=True, backend="aot_eager")
    y = g(meta(3, 2048), meta(2048), meta(6144, 2048), meta(6144, 2048), meta(2048, 6144))
    assert y.shape == (3, 2048) and y.dtype == BF


def test_compile_fullgraph_keeps_the_residual_write():
    # the mutated residual survives functionalization: the compiled function
    # returns y and the residual with their shapes
    def f(x, r, w, Wqkv, Wo, w2, Wgu):
        qkv = torch.ops.atk.add_gemma_rmsnorm_gemv(x, r, w, Wqkv, 1e-6, 0)
        a = torch.ops.atk.gemv(qkv[..., :2048], Wo, 0)
        return torch.ops.atk.add_rmsnorm_gemv(a, r, w2, Wgu, 1e-6, 0), r

    g = torch.compile(f, fullgraph=True, backend="aot_eager")
    y, r = g(meta(3, 2048), meta(3, 2048), meta(2048), meta(4096, 2048), meta(2048, 2048), meta(2048),
             meta(6144, 2048))
    assert y.shape == (3, 6144) and r.shape == (3, 2048) and y.dtype == BF


def test_closed_table_refuses_fused(dry):
    with atk.open_dry(dry.path) as t:
        pass
    with pytest.raises(atk.AtkError, match="closed"):
        t.rmsnorm_gemv(meta(1, 2048), meta(2048), meta(8, 2048))
