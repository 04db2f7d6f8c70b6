"""Every argument check of the Table calls, on a dry table with CPU and
meta tensors: each bad input raises TypeError/ValueError naming it before
anything is counted or launched (the device check comes last, so CPU
tensors reach the other checks)."""

import pytest
import torch

import atk

BF, FP = torch.bfloat16, torch.float16


def cpu(*shape, dtype=BF):
    return torch.zeros(*shape, dtype=dtype)


def meta(*shape, dtype=BF):
    return torch.empty(*shape, dtype=dtype, device="meta")


def no_calls(t):
    assert all(d["calls"] == 0 for d in t.stats().values())


def test_cpu_tensor(dry):
    with pytest.raises(ValueError, match=r"atk.gemv: x must be a CUDA tensor \(got cpu"):
        dry.gemv(cpu(1, 2048), cpu(2048, 2048))
    with pytest.raises(ValueError, match="atk.add_gemma_rmsnorm: x must be a CUDA tensor"):
        dry.add_gemma_rmsnorm(cpu(1, 2048), cpu(1, 2048), cpu(2048))
    no_calls(dry)


def test_mixed_devices(dry):
    with pytest.raises(ValueError, match="W is on cpu, x on meta"):
        dry.gemv(meta(1, 2048), cpu(2048, 2048))
    with pytest.raises(ValueError, match="residual is on cpu"):
        dry.add_rmsnorm(meta(1, 2048), cpu(1, 2048), meta(2048))
    no_calls(dry)


def test_not_a_tensor(dry):
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        dry.gemv([1.0] * 2048, meta(2048, 2048))
    with pytest.raises(TypeError, match="w must be a torch.Tensor"):
        dry.rmsnorm(meta(1, 2048), None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.float64])
def test_wrong_dtype(dry, dtype):
    with pytest.raises(TypeError, match=f"x must be bfloat16 or float16 \\(got {dtype}\\)"):
        dry.gemv(cpu(1, 2048, dtype=dtype), cpu(2048, 2048))
    with pytest.raises(TypeError, match="W must be bfloat16 or float16"):
        dry.gemv(cpu(1, 2048), cpu(2048, 2048, dtype=dtype))


def test_mixed_dtypes(dry):
    with pytest.raises(TypeError, match="W is torch.float16, x is torch.bfloat16"):
        dry.gemv(cpu(1, 2048), cpu(2048, 2048, dtype=FP))
    with pytest.raises(TypeError, match="w is torch.float16, x is torch.bfloat16"):
        dry.rmsnorm(cpu(1, 2048), cpu(2048, dtype=FP))
    with pytest.raises(TypeError, match="residual is torch.float16"):
        dry.add_rmsnorm(cpu(1, 2048), cpu(1, 2048, dtype=FP), cpu(2048))
    no_calls(dry)


def test_mismatched_k(dry):
    with pytest.raises(ValueError, match=r"x has K=1024 columns, W \[N=2048, K=2048\] needs K=2048"):
        dry.gemv(cpu(1, 1024), cpu(2048, 2048))
    with pytest.raises(ValueError, match="x has H=1024 columns, w has 2048"):
        dry.gemma_rmsnorm(cpu(1, 1024), cpu(2048))
    with pytest.raises(ValueError, match=r"residual has shape \(2, 2048\), x \(1, 2048\)"):
        dry.add_gemma_rmsnorm(cpu(1, 2048), cpu(2, 2048), cpu(2048))


def test_wrong_rank(dry):
    with pytest.raises(ValueError, match="W must have 2 dimension"):
        dry.gemv(cpu(1, 2048), cpu(2048))
    with pytest.raises(ValueError, match="w must have 1 dimension"):
        dry.rmsnorm(cpu(1, 2048), cpu(1, 2048))
    with pytest.raises(ValueError, match="x must have at least one dimension"):
        dry.rmsnorm(cpu(()), cpu(2048))


def test_empty(dry):
    with pytest.raises(ValueError, match="empty problem"):
        dry.gemv(meta(0, 2048), meta(2048, 2048))
    with pytest.raises(ValueError, match="empty problem"):
        dry.rmsnorm(meta(0, 2048), meta(2048))


def test_non_contiguous(dry):
    W = cpu(2048, 4096)[:, :2048]  # rows with a stride: no leading-dimension argument in the C API
    with pytest.raises(ValueError, match=r"W must be contiguous \(got strides \(4096, 1\)"):
        dry.gemv(cpu(1, 2048), W)
    with pytest.raises(ValueError, match="x must be contiguous"):
        dry.gemv(cpu(2048, 2).t(), cpu(2048, 2048))
    with pytest.raises(ValueError, match="residual must be contiguous"):
        dry.add_rmsnorm(cpu(2, 2048), cpu(2048, 2).t(), cpu(2048))


def test_misaligned(dry):
    base = cpu(2 * 2048 + 8)
    x = base[1:1 + 2048].view(1, 2048)  # one element (2 bytes) past an aligned start
    assert x.is_contiguous() and x.data_ptr() % 16 == 2
    with pytest.raises(ValueError, match=r"x's data must be 16-byte aligned \(data_ptr\(\) % 16 = 2"):
        dry.gemv(x, cpu(2048, 2048))
    with pytest.raises(ValueError, match="w's data must be 16-byte aligned"):
        dry.rmsnorm(cpu(1, 2048), base[1:2049])
    no_calls(dry)


def test_wrong_out(dry):
    x, W = meta(2, 2048), meta(32, 2048)
    with pytest.raises(ValueError, match=r"out must have shape \(2, 32\) \(got \(2, 33\)\)"):
        dry.gemv(x, W, out=meta(2, 33))
    with pytest.raises(TypeError, match="out must be torch.bfloat16 like the inputs"):
        dry.gemv(x, W, out=meta(2, 32, dtype=FP))
    with pytest.raises(TypeError, match="out must be bfloat16 or float16"):
        dry.gemv(x, W, out=meta(2, 32, dtype=torch.float32))
    with pytest.raises(ValueError, match="out must be contiguous"):
        dry.gemv(x, W, out=meta(32, 2).t())
    with pytest.raises(ValueError, match="out is on cpu"):
        dry.gemv(x, W, out=cpu(2, 32))
    with pytest.raises(ValueError, match=r"out must have shape \(2, 2048\)"):
        dry.rmsnorm(meta(2, 2048), meta(2048), out=meta(1, 2048))
    no_calls(dry)


def test_good_call_counts_once(dry):
    dry.gemv(meta(1, 2048), meta(2048, 2048))
    assert dry.stats()["gemv"]["calls"] == 1


@pytest.fixture
def as_real(dry, monkeypatch):
    """The dry table made to look like a real one on "device -1" (what
    get_device() says for CPU and meta tensors), with a null stream: the
    fast path of a real table then runs here, against the dry context,
    which chooses and counts without reading any pointer."""
    monkeypatch.setattr(dry, "dry", False)
    monkeypatch.setattr(dry, "device", -1)
    monkeypatch.setattr(atk.table, "_raw_stream", lambda index: None)
    return dry


def test_fast_path_calls_and_counts(as_real):
    t = as_real
    W = meta(2048, 2048)
    assert t.gemv(meta(1, 2048), W).shape == (1, 2048)
    assert t.gemv(meta(2, 3, 2048), W).shape == (2, 3, 2048)  # M = 6: bucket
    assert t.gemv(meta(2048), W).shape == (2048,)
    out = meta(40, 2048)
    assert t.gemv(meta(40, 2048), W, out=out) is out
    r = meta(3, 2048)
    assert t.add_gemma_rmsnorm(meta(3, 2048), r, meta(2048)).shape == (3, 2048)
    y = meta(1, 2048)
    assert t.gemma_rmsnorm(meta(1, 2048), meta(2048), out=y) is y
    s = t.stats()
    assert s["gemv"] == {"calls": 4, "tuned": 2, "bucket": 1, "inferred": 0, "fallback": 1, "missed": 0,
                         "rejected": 0}
    assert s["add_gemma_rmsnorm"]["bucket"] == 1 and s["gemma_rmsnorm"]["tuned"] == 1


def test_fast_path_still_rejects_bad_input(as_real):
    t = as_real
    base = cpu(2 * 2048 + 8)
    with pytest.raises(ValueError, match="x's data must be 16-byte aligned"):
        t.gemv(base[1:2049].view(1, 2048), cpu(2048, 2048))
    with pytest.raises(TypeError, match="W is torch.float16"):
        t.gemv(meta(1, 2048), meta(2048, 2048, dtype=FP))
    with pytest.raises(ValueError, match="W must be contiguous"):
        t.gemv(meta(1, 2048), meta(2048, 4096)[:, :2048])
    with pytest.raises(ValueError, match=r"out must have shape \(1, 2048\)"):
        t.gemv(meta(1, 2048), meta(2048, 2048), out=meta(2, 2048))
    with pytest.raises(ValueError, match=r"residual has shape"):
        t.add_rmsnorm(meta(1, 2048), meta(2, 2048), meta(2048))
    with pytest.raises(ValueError, match="out must be contiguous"):
        t.rmsnorm(meta(2, 2048), meta(2048), out=meta(2048, 2).t())
    # the checked path of a real table wants CUDA tensors
    with pytest.raises(ValueError, match=r"x must be a CUDA tensor \(got meta\)"):
        t._gemv_checked(meta(1, 2048), meta(2048, 2048), None)
    assert all(d["calls"] == 0 for d in t.stats().values())


def test_gemv_add_checks_and_counts(dry):
    x = torch.empty(3, 2048, dtype=BF, device="meta")
    W = torch.empty(2048, 2048, dtype=BF, device="meta")
    r = torch.empty(3, 2048, dtype=BF, device="meta")
    assert dry.gemv_add(x, W, r) is r
    assert dry.stats()["gemv_add"]["calls"] == 1
    with pytest.raises(ValueError, match="residual must have shape"):
        dry.gemv_add(x, W, torch.empty(3, 1024, dtype=BF, device="meta"))
    with pytest.raises(TypeError, match="residual is torch.float16"):
        dry.gemv_add(x, W, torch.empty(3, 2048, dtype=torch.float16, device="meta"))
    with pytest.raises(ValueError, match="K=2048"):
        dry.gemv_add(torch.empty(3, 1024, dtype=BF, device="meta"), W, r)
    with pytest.raises(ValueError, match="CUDA tensor"):
        dry.gemv_add(torch.empty(3, 2048, dtype=BF), torch.empty(2048, 2048, dtype=BF), torch.empty(3, 2048, dtype=BF))
    assert dry.stats()["gemv_add"]["calls"] == 1
