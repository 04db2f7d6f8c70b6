"""The fused decode ops without a GPU (a dry table, meta tensors): Table
calls return y's shape, count in their own op's counters, name a bad
argument (shape, dtype, scratch size); scratch_bytes; the torch.ops.atk
schemas and fake kernels; torch.compile(fullgraph=True) tracing them."""

import pytest
import torch

import atk
import atk.ops  # noqa: F401

BF = torch.bfloat16
FUSED = ("rmsnorm_gemv", "gemma_rmsnorm_gemv", "gemv_swiglu", "rmsnorm_gemv_swiglu", "gemma_rmsnorm_gemv_swiglu")


def meta(*shape, dtype=BF):
    return torch.empty(*shape, dtype=dtype, device="meta")


def call(t, op, x, K, N, **kw):
    """One call of op through Table with meta weights of [N, K]."""
    w, W, Wu = meta(K), meta(N, K), meta(N, K)
    fn = getattr(t, op)
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
    assert dry.scratch_bytes("rmsnorm_gemv", "bf16", 3, 2048, 2048) == 12288
    assert dry.scratch_bytes("gemv_swiglu", BF, 1, 2048, 6144) == 24576
    assert dry.scratch_bytes("rmsnorm_gemv_swiglu", "fp16", 1, 100, 10) == 768
    assert dry.scratch_bytes("gemv", "bf16", 1, 2048, 2048) == 0


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
    with pytest.raises(ValueError, match="scratch has 100 bytes, the call needs 8192"):
        dry.gemv_swiglu(x, meta(2048, 2048), meta(2048, 2048), scratch=torch.empty(100, dtype=torch.uint8,
                                                                                     device="meta"))
    with pytest.raises(TypeError, match="scratch must be a torch.Tensor"):
        dry.gemv_swiglu(x, meta(8, 2048), meta(8, 2048), scratch=1234)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        dry.rmsnorm_gemv(torch.zeros(1, 64, dtype=BF), torch.zeros(64, dtype=BF), torch.zeros(8, 64, dtype=BF))


def test_op_schemas_and_fakes():
    for name in FUSED:
        s = getattr(torch.ops.atk, name).default._schema
        assert s.arguments[-1].name == "table" and len(s.returns) == 1
        assert not [a for a in s.arguments if a.alias_info is not None and a.alias_info.is_write]
    x, w, W = meta(3, 64), meta(64), meta(7, 64)
    assert torch.ops.atk.rmsnorm_gemv(x, w, W, 1e-6, 0).shape == (3, 7)
    assert torch.ops.atk.gemma_rmsnorm_gemv(x, w, W, 1e-6, 0).shape == (3, 7)
    assert torch.ops.atk.gemv_swiglu(x, W, W, 0).shape == (3, 7)
    assert torch.ops.atk.rmsnorm_gemv_swiglu(x, w, W, W, 1e-6, 0).shape == (3, 7)
    assert torch.ops.atk.gemma_rmsnorm_gemv_swiglu(x, w, W, W, 1e-6, 0).shape == (3, 7)
    with pytest.raises(Exception, match="K must equal"):
        torch.ops.atk.gemv_swiglu(meta(3, 32), W, W, 0)


def test_compile_fullgraph_traces_fused_ops():
    def f(x, w, Wg, Wu, Wd):
        a = torch.ops.atk.gemma_rmsnorm_gemv_swiglu(x, w, Wg, Wu, 1e-6, 0)
        return torch.ops.atk.gemv(a, Wd, 0)

    g = torch.compile(f, fullgraph=True, backend="aot_eager")
    y = g(meta(3, 2048), meta(2048), meta(6144, 2048), meta(6144, 2048), meta(2048, 6144))
    assert y.shape == (3, 2048) and y.dtype == BF


def test_closed_table_refuses_fused(dry):
    with atk.open_dry(dry.path) as t:
        pass
    with pytest.raises(atk.AtkError, match="closed"):
        t.rmsnorm_gemv(meta(1, 2048), meta(2048), meta(8, 2048))
