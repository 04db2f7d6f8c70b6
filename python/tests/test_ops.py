"""The torch.ops.atk.* custom ops without a GPU: schemas (the add ops
declare their write to residual), fake kernels on meta tensors, the CPU
kernel's error, and torch.compile(fullgraph=True) tracing them."""

import pytest
import torch

import atk
import atk.ops  # noqa: F401

BF = torch.bfloat16
OPS = ("gemv", "rmsnorm", "gemma_rmsnorm", "add_rmsnorm", "add_gemma_rmsnorm")  # the ops returning a Tensor


def meta(*shape, dtype=BF):
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_schemas():
    for name in OPS:
        s = getattr(torch.ops.atk, name).default._schema
        assert s.arguments[-1].name == "table" and str(s.arguments[-1].type) == "int"
        writes = [a.name for a in s.arguments if a.alias_info is not None and a.alias_info.is_write]
        assert writes == (["residual"] if name.startswith("add_") else []), name
        assert len(s.returns) == 1


def test_gemv_add_schema_writes_residual_returns_nothing():
    s = torch.ops.atk.gemv_add.default._schema
    writes = [a.name for a in s.arguments if a.alias_info is not None and a.alias_info.is_write]
    assert writes == ["residual"] and len(s.returns) == 0
    assert torch.ops.atk.gemv_add(meta(3, 64), meta(7, 64), meta(3, 7), 0) is None  # the fake kernel
    with pytest.raises(Exception, match="K must equal"):
        torch.ops.atk.gemv_add(meta(3, 32), meta(7, 64), meta(3, 7), 0)


def test_fake_gemv_on_meta():
    y = torch.ops.atk.gemv(meta(3, 2048), meta(100, 2048), 0)  # no table needed for shapes
    assert y.shape == (3, 100) and y.dtype == BF and y.device.type == "meta"
    y = torch.ops.atk.gemv(meta(2, 5, 64, dtype=torch.float16), meta(7, 64, dtype=torch.float16), 0)
    assert y.shape == (2, 5, 7) and y.dtype == torch.float16


@pytest.mark.parametrize("name", OPS[1:])
def test_fake_norms_on_meta(name):
    x, w = meta(4, 2048), meta(2048)
    if name.startswith("add_"):
        y = getattr(torch.ops.atk, name)(x, meta(4, 2048), w, 1e-6, 0)
    else:
        y = getattr(torch.ops.atk, name)(x, w, 1e-6, 0)
    assert y.shape == (4, 2048) and y.dtype == BF and y.device.type == "meta"


def test_cpu_kernel_names_the_problem(dry):
    with pytest.raises(ValueError, match="x must be a CUDA tensor"):
        torch.ops.atk.gemv(torch.zeros(1, 2048, dtype=BF), torch.zeros(2048, 2048, dtype=BF), dry.handle)
    with pytest.raises(atk.AtkError, match="no open table with handle"):
        torch.ops.atk.rmsnorm(torch.zeros(1, 2048, dtype=BF), torch.zeros(2048, dtype=BF), 1e-6, 10 ** 9)


def test_compile_fullgraph_traces_ops():
    def f(x, r, W, w):
        y = torch.ops.atk.add_gemma_rmsnorm(x, r, w, 1e-6, 0)
        return torch.ops.atk.gemv(y, W, 0)

    g = torch.compile(f, fullgraph=True, backend="aot_eager")
    y = g(meta(3, 2048), meta(3, 2048), meta(32, 2048), meta(2048))
    assert y.shape == (3, 32) and y.dtype == BF

