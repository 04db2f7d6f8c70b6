"""A dry table (the shipped H200 table, no GPU): open, info, explain on
every path, serves, stats counting, report, reset, and errors of a closed
table or an unknown op/dtype."""

import json

import pytest
import torch

import atk
from conftest import TABLE

BF = torch.bfloat16


def meta(*shape, dtype=BF):
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_info_matches_the_json_device(dry):
    dev = json.loads(TABLE.read_text())["devices"][0]
    i = dry.info()
    assert i["device"] == dev["name"] == "NVIDIA H200"
    assert i["cc"] == 10 * dev["cc_major"] + dev["cc_minor"] == 90
    assert i["sms"] == dev["sms"] == 132
    assert i["dry"] is True
    assert i["rows"] == i["for_this_gpu"] == i["loaded"] == len(dev["entries"])
    assert i["failed"] == 0 and i["all_fallback"] is False


def test_explain_tuned(dry):
    c = dry.explain("gemv", "bf16", 1, 2048, 2048)
    assert c.path == "tuned" and c.reason == "tuned"
    assert c.from_shape == "1x2048x2048" and c.strategy == "splitk" and c.kernel == "gemv_splitk"
    assert c.bucket == 0 and len(c.key) == 64 and c.params.startswith("TP_")
    assert isinstance(c.grid, tuple) and c.grid[0] > 0 and c.block[0] > 0


def test_explain_bucket_at_m3(dry):
    c = dry.explain("gemv", torch.bfloat16, 3, 2048, 2048)
    assert c.path == "bucket" and c.bucket == 4 and c.from_shape == "4x2048x2048"
    assert "1 token masked" in c.reason
    n = dry.explain("gemma_rmsnorm", "bf16", 3, 2048)
    assert n.path == "bucket" and n.bucket == 4 and n.from_shape == "4x2048"


def test_explain_inferred(dry):
    c = dry.explain("gemv", "bf16", 1, 2048, 4096)
    assert c.path == "inferred" and c.from_shape == "1x2048x5120" and c.reason.startswith("inferred")
    assert dry.explain("gemv", "bf16", 1, 2048, 4096).path == "inferred"


def test_explain_fallback_at_m40(dry):
    c = dry.explain("gemv", "bf16", 40, 2048, 2048)
    assert c.path == "fallback" and c.strategy == "cublas" and c.kernel == "" and c.from_shape == ""
    assert "M=40" in c.reason
    # no fp16 and no plain rmsnorm in this table
    assert dry.explain("gemv", "fp16", 1, 2048, 2048).path == "fallback"
    assert dry.explain("rmsnorm", "bf16", 1, 2048).strategy == "norm_naive"


def test_no_infer_flag_turns_inferred_into_fallback():
    with atk.open_dry(TABLE, flags=atk.NO_INFER) as t:
        assert t.explain("gemv", "bf16", 1, 2048, 4096).path == "fallback"
        assert t.explain("gemv", "bf16", 1, 2048, 2048).path == "tuned"


def test_serves(dry):
    assert dry.serves("gemv", "bf16", 1, 2048, 2048)
    assert dry.serves("gemv", BF, 3, 2048, 2048)
    assert dry.serves("gemv", "bf16", 1, 2048, 4096)
    assert not dry.serves("gemv", "bf16", 40, 2048, 2048)
    assert not dry.serves("gemv", "fp16", 1, 2048, 2048)
    assert not dry.serves("gemv", "bf16", 0, 2048, 2048)  # refused by the library: not served
    assert dry.serves("add_gemma_rmsnorm", "bf16", 8, 2048)
    assert not dry.serves("rmsnorm", "bf16", 8, 2048)


def test_stats_count_each_path(dry):
    W = meta(2048, 2048)
    dry.gemv(meta(1, 2048), W)                    # tuned
    dry.gemv(meta(3, 2048), W)                    # bucket
    dry.gemv(meta(3, 2048), W)                    # bucket
    dry.gemv(meta(1, 2048), meta(4096, 2048))     # inferred
    dry.gemv(meta(40, 2048), W)                   # fallback
    w = meta(2048)
    r = meta(2, 2048)
    dry.add_gemma_rmsnorm(meta(2, 2048), r, w)    # tuned
    dry.rmsnorm(meta(2, 2048), w)                 # fallback (not in the table)
    s = dry.stats()
    assert set(s) == set(atk._lib.OP_NAMES) and len(s) == 13
    assert s["gemv"] == {"calls": 5, "tuned": 1, "bucket": 2, "inferred": 1, "fallback": 1, "missed": 0,
                         "rejected": 0}
    assert s["add_gemma_rmsnorm"]["calls"] == 1 and s["add_gemma_rmsnorm"]["tuned"] == 1
    assert s["rmsnorm"]["calls"] == 1 and s["rmsnorm"]["fallback"] == 1
    assert s["gemma_rmsnorm"]["calls"] == 0 and s["add_rmsnorm"]["calls"] == 0
    dry.reset_stats()
    assert all(v == 0 for d in dry.stats().values() for v in d.values())


def test_explain_does_not_count(dry):
    dry.explain("gemv", "bf16", 1, 2048, 2048)
    dry.serves("gemv", "bf16", 1, 2048, 2048)
    assert dry.stats()["gemv"]["calls"] == 0


def test_strict_call_misses():
    with atk.open_dry(TABLE, flags=atk.STRICT) as t:
        t.gemv(meta(1, 2048), meta(2048, 2048))
        with pytest.raises(atk.AtkError) as e:
            t.gemv(meta(40, 2048), meta(2048, 2048))
        assert e.value.status == 12
        assert t.stats()["gemv"]["missed"] == 1


def test_call_returns_output_shape(dry):
    y = dry.gemv(meta(2, 3, 2048), meta(32, 2048))
    assert y.shape == (2, 3, 32) and y.dtype == BF and y.device.type == "meta"
    assert dry.gemv(meta(2048), meta(32, 2048)).shape == (32,)
    out = meta(2, 32)
    assert dry.gemv(meta(2, 2048), meta(32, 2048), out=out) is out
    assert dry.gemma_rmsnorm(meta(5, 2048), meta(2048), eps=1e-5).shape == (5, 2048)


def test_report(dry):
    r = dry.report()
    assert "NVIDIA H200" in r and "dry" in r and str(TABLE) in r
    assert "56 loaded" in r
    assert "buckets gemv bf16 2048x2048" in r


def test_unknown_op_and_dtype(dry):
    with pytest.raises(ValueError, match="op must be one of"):
        dry.explain("matmul", "bf16", 1, 2, 3)
    with pytest.raises(TypeError, match="bf16 or fp16"):
        dry.explain("gemv", "fp32", 1, 2, 3)
    with pytest.raises(TypeError, match="bf16 or fp16"):
        dry.explain("gemv", torch.float32, 1, 2, 3)
    with pytest.raises(atk.AtkError) as e:
        dry.explain("gemv", "bf16", 0, 2048, 2048)
    assert e.value.status == 2


def test_closed_table(dry):
    with atk.open_dry(TABLE) as t:
        h = t.handle
        assert atk.table.lookup(h) is t
    assert t.closed
    for call in (lambda: t.explain("gemv", "bf16", 1, 2048, 2048), lambda: t.serves("gemv", "bf16", 1, 2048, 2048),
                 t.stats, t.report, t.info, t.reset_stats,
                 lambda: t.gemv(meta(1, 2048), meta(2048, 2048)),
                 lambda: t.rmsnorm(meta(1, 2048), meta(2048)),
                 lambda: t.add_gemma_rmsnorm(meta(1, 2048), meta(1, 2048), meta(2048))):
        with pytest.raises(atk.AtkError, match="closed") as e:
            call()
        assert e.value.status == 2
    with pytest.raises(atk.AtkError, match="no open table"):
        atk.table.lookup(h)
    t.close()  # a second close is a no-op


def test_missing_table_opens_on_fallback_unless_strict(tmp_path):
    missing = tmp_path / "none.json"
    with atk.open_dry(missing) as t:
        assert t.info()["all_fallback"] is True
        assert t.explain("gemv", "bf16", 1, 2048, 2048).path == "fallback"
    with pytest.raises(atk.AtkError) as e:
        atk.open_dry(missing, flags=atk.STRICT_OPEN)
    assert e.value.status == 8 and "none.json" in str(e.value)


def test_foreign_gpu_gets_nothing():
    with atk.open_dry(TABLE, gpu="NVIDIA A100-SXM4-80GB", cc=80, sms=108) as t:
        assert t.info()["for_this_gpu"] == 0
        assert not t.serves("gemv", "bf16", 1, 2048, 2048)


def test_gpu_cases_take_their_paths(dry):
    """The paths the GPU tests expect (test_gpu_ops) are what the dry H200 table says."""
    from test_gpu_ops import GEMV_CASES, NORM_CASES
    for M, K, N, dtype, path in GEMV_CASES:
        assert dry.explain("gemv", dtype, M, K, N).path == path, (M, K, N, dtype)
    for op, T, H, dtype, path in NORM_CASES:
        assert dry.explain(op, dtype, T, H).path == path, (op, T, H, dtype)
