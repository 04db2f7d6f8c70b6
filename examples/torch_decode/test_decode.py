"""examples/torch_decode/test_decode.py — the torch decode example without a
GPU: a tiny config of the same model code (hidden 64, 2 layers — one linear,
one full attention — vocab 100, float32 on the CPU) runs steps with the right
shapes; the norm, the stand-ins and silu*mul match scalar references of the
C kernels' math; the stand-ins are deterministic and the recurrence carries
its state; the fused step (forward_fused) through torch versions of atk's
fused calls computes forward's step, and on meta tensors a dry table counts
the C engine's mode-4 calls; decode.py's harness (timing and graphs replaced
by CPU fakes) compares every mode on every row and reports; its bad
arguments exit 2 with a message. On a GPU (marked gpu) the fused step
through the shipped fused table's real calls agrees with eager's.
Run: python3 -m pytest examples/torch_decode -q
"""
import collections
import json
import math
import subprocess
import sys
import types
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import decode  # noqa: E402
import model as M  # noqa: E402


@pytest.fixture
def tiny():
    return M.make_model(M.TINY, dtype=torch.float32, device="cpu", seed=3)


# ------------------------------------------------------------------ the model

def test_tiny_step_shapes_and_layers(tiny):
    assert [layer.linear for layer in tiny.layers] == [True, False]
    with torch.inference_mode():
        for B in (1, 3, M.TINY.max_batch):
            hidden, logits = tiny(B)
            assert hidden.shape == (B, 64) and logits.shape == (B, 100)
            assert hidden.dtype == torch.float32
            assert torch.isfinite(logits).all()


def test_full_config_matches_the_c_engine():
    cfg = M.QWEN35_2B
    assert (cfg.hidden, cfg.layers, cfg.inter, cfg.vocab) == (2048, 24, 6144, 248320)
    assert (cfg.qkvg, cfg.qkvz, cfg.ba, cfg.qkvzba, cfg.head_dim, cfg.lin_dim) == (5120, 8192, 32, 8224, 256, 128)
    assert sum(cfg.is_linear(i) for i in range(cfg.layers)) == 18
    with torch.device("meta"):
        m = M.DecodeModel(cfg)
    shapes = {tuple(mod.weight.shape) for mod in m.modules() if isinstance(mod, torch.nn.Linear)}
    assert shapes == {(5120, 2048), (2048, 2048), (8224, 2048), (12288, 2048), (2048, 6144), (248320, 2048)}
    assert all(mod.bias is None for mod in m.modules() if isinstance(mod, torch.nn.Linear))
    assert sum(isinstance(mod, M.GemmaRMSNorm) for mod in m.modules()) == 49
    assert m.weight_bytes() == 3_762_753_536  # the C engine's 3.76 GB


def test_bad_config_and_batch_are_named():
    with pytest.raises(ValueError, match="lin_heads"):
        M.Config(hidden=60, lin_heads=16, attn_heads=4, kv_heads=2)
    with pytest.raises(ValueError, match="layers"):
        M.Config(layers=0)
    m = M.make_model(M.TINY, dtype=torch.float32, device="cpu")
    with pytest.raises(ValueError, match="B = 5"):
        m(5)


def test_steps_are_deterministic_and_the_state_carries(tiny):
    with torch.inference_mode():
        tiny.reset_state()
        h1, l1 = tiny(2)
        h2, l2 = tiny(2)  # the linear-attention state moved on
        tiny.reset_state()
        h3, l3 = tiny(2)
    assert torch.equal(h1, h3) and torch.equal(l1, l3)
    assert not torch.equal(l1, l2)
    again = M.make_model(M.TINY, dtype=torch.float32, device="cpu", seed=3)
    with torch.inference_mode():
        assert torch.equal(again(2)[1], l1)


def test_activations_stay_finite_through_24_layers():
    cfg = M.Config(hidden=256, layers=24, inter=768, vocab=300, max_batch=2)
    m = M.make_model(cfg, dtype=torch.bfloat16, device="cpu")
    with torch.inference_mode():
        for _ in range(3):
            hidden, logits = m(2)
    assert torch.isfinite(logits.float()).all()
    # variance-1/K weights and a unit-RMS norm keep the scale near 1
    assert 0.3 < hidden.float().pow(2).mean().sqrt() < 3


# ------------------------------------------------------------------ the ops

def test_gemma_rmsnorm_plain_and_add_forms():
    torch.manual_seed(0)
    n = M.GemmaRMSNorm(8, eps=1e-6)
    with torch.no_grad():
        n.weight.uniform_(-0.1, 0.1)
    x, r = torch.randn(3, 8), torch.randn(3, 8)
    ref = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (1 + n.weight)
    torch.testing.assert_close(n(x), ref.detach())
    r0 = r.clone()
    y, res = n(x, r)
    assert res is r and torch.equal(r, x + r0)  # updated in place, and returned
    torch.testing.assert_close(y, n(x + r0))


def test_gemma_rmsnorm_rounds_the_sum_like_the_c_kernel():
    # bf16: residual = round(x + r); y from that rounded sum
    x = torch.tensor([[1.0, 2.0, 3.0, 0.00390625]], dtype=torch.bfloat16)
    r = torch.tensor([[256.0, 0.0, 0.0, 1.0]], dtype=torch.bfloat16)
    n = M.GemmaRMSNorm(4).to(torch.bfloat16)
    y, res = n(x, r)
    assert res.tolist() == [[256.0, 2.0, 3.0, 1.0]]  # 257 and 1.0039 round in bf16
    v = res.float()
    torch.testing.assert_close(y, (v / torch.sqrt(v.pow(2).mean() + 1e-6)).to(torch.bfloat16))


def test_gemma_rmsnorm_is_what_atk_patch_detects():
    # atk.patch autodetects a class named *RMSNorm with weight and eps; Gemma
    # by the name or atk_norm = "gemma" (the API the package implements)
    n = M.GemmaRMSNorm(16)
    assert type(n).__name__.endswith("RMSNorm") and "Gemma" in type(n).__name__
    assert n.atk_norm == "gemma" and isinstance(n.weight, torch.nn.Parameter) and n.eps == 1e-6


def test_standin_attention_is_v_times_sigmoid_gate():
    cfg = M.Config(hidden=8, attn_heads=4, kv_heads=2, lin_heads=2, max_batch=2)  # heads of 2, groups of 2
    torch.manual_seed(1)
    qkvg = torch.randn(2, cfg.qkvg)
    out = M.standin_attention(qkvg, cfg)
    for t in range(2):
        for i in range(8):  # the C kernel's indexing
            head = i // cfg.head_dim
            kv = head // (cfg.attn_heads // cfg.kv_heads)
            v = qkvg[t, 2 * 8 + cfg.kv_heads * cfg.head_dim + kv * cfg.head_dim + i % cfg.head_dim]
            g = qkvg[t, 8 + i]
            assert out[t, i].item() == pytest.approx((v / (1 + torch.exp(-g))).item(), rel=1e-5)


def test_standin_linear_matches_the_c_loop_and_updates_the_state():
    cfg = M.Config(hidden=8, attn_heads=2, kv_heads=1, lin_heads=2, max_batch=2)  # 2 heads of 4
    torch.manual_seed(2)
    qkvz, ba = torch.randn(2, cfg.qkvz), torch.randn(2, cfg.ba)
    state = torch.randn(2, 2, 4, 4)
    S = state.clone()
    out = M.standin_linear(qkvz, ba, state, cfg)
    D, sc = 4, 1 / math.sqrt(4)
    for t in range(2):
        for h in range(2):
            beta = 1 / (1 + math.exp(-ba[t, h].item()))
            decay = 1 / (1 + math.exp(-ba[t, 2 + h].item()))
            for j in range(D):
                v, z = qkvz[t, 16 + h * D + j].item(), qkvz[t, 24 + h * D + j].item()
                acc = 0.0
                for i in range(D):
                    q, k = qkvz[t, h * D + i].item() * sc, qkvz[t, 8 + h * D + i].item() * sc
                    s = decay * S[t, h, i, j].item() + beta * k * v
                    assert state[t, h, i, j].item() == pytest.approx(s, rel=1e-5, abs=1e-6)
                    acc += q * s
                assert out[t, h * D + j].item() == pytest.approx(acc * z / (1 + math.exp(-z)), rel=1e-4, abs=1e-6)


def test_silu_mul():
    gu = torch.tensor([[1.0, -2.0, 3.0, 4.0]])
    out = M.silu_mul(gu, 2)
    torch.testing.assert_close(out, torch.tensor([[1 / (1 + math.exp(-1)) * 3, -2 / (1 + math.exp(2)) * 4]]))


# ------------------------------------------------------------------ the fused step

class TorchFused:
    """atk's three fused calls in torch, rounded as atk rounds them (the
    normalized x, g, u and the sum to the element type), counting calls:
    what forward_fused needs of a table."""

    def __init__(self, drop_add=False):
        self.calls = collections.Counter()
        self.drop_add = drop_add  # a planted bug: gemv_add adds nothing

    def gemma_rmsnorm_gemv(self, x, w, W, eps):
        self.calls["gemma_rmsnorm_gemv"] += 1
        return F.linear(M.gemma_rmsnorm(x, w, eps), W)

    def gemma_rmsnorm_gemv_swiglu(self, x, w, Wg, Wu, eps):
        self.calls["gemma_rmsnorm_gemv_swiglu"] += 1
        n = M.gemma_rmsnorm(x, w, eps)
        return (F.silu(F.linear(n, Wg).float()) * F.linear(n, Wu).float()).to(x.dtype)

    def gemv_add(self, x, W, residual):
        self.calls["gemv_add"] += 1
        if not self.drop_add:
            residual.add_(F.linear(x, W))
        return residual


@pytest.mark.parametrize("standins", [True, False])
def test_fused_step_computes_the_step(tiny, standins):
    # the same weights, norms and stand-ins as forward, in the fused calls'
    # order: hidden, logits and the carried state agree with forward's
    tiny.set_standins(standins)
    t = TorchFused()
    with torch.inference_mode():
        tiny.reset_state()
        ref = tiny(3)
        ref_state = [mod.state.clone() for mod in tiny.modules() if isinstance(mod, M.LinearAttention)]
        tiny.reset_state()
        r, logits = tiny.forward_fused(3, t)
        state = [mod.state for mod in tiny.modules() if isinstance(mod, M.LinearAttention)]
        hidden = tiny.hidden_of(r)
    torch.testing.assert_close(hidden, ref[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits, ref[1], rtol=1e-5, atol=1e-5)
    for a, b in zip(state, ref_state):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # TINY: 2 layers (one linear: qkvz|ba; one full: qkvg) and the lm_head
    assert t.calls == {"gemma_rmsnorm_gemv": 3, "gemma_rmsnorm_gemv_swiglu": 2, "gemv_add": 4}
    assert not torch.equal(tiny.embed[:3], r)  # the stream moved on from the embeddings


def test_fused_step_check_sees_a_missing_add(tiny):
    with torch.inference_mode():
        ref = tiny(2)
        tiny.reset_state()
        r, logits = tiny.forward_fused(2, TorchFused(drop_add=True))
        c = decode.compare((tiny.hidden_of(r), logits), ref, decode.TOLERANCE)
    assert c["agree"] is False


def test_fused_step_calls_what_the_c_engine_calls():
    # on meta tensors a dry table of the shipped fused table counts a GPU
    # step's calls: per layer one norm+GEMV (linear attention: qkvz|ba), the
    # norm+gate_up+SwiGLU, two residual adds; and the lm_head's norm+GEMV
    atk, _ = dry_table()
    fused_db = decode.DEFAULT_DB.parent / "qwen3.5-2b-h200-fused.json"
    t = atk.open_dry(str(fused_db))
    with torch.device("meta"):
        m = M.DecodeModel(M.QWEN35_2B)
    with t, torch.inference_mode():
        r, logits = m.forward_fused(1, t)
        stats = t.stats()
    assert r.shape == (1, 2048) and logits.shape == (1, 248320)
    calls = {op: d["calls"] for op, d in stats.items() if d.get("calls")}
    assert calls == {"gemma_rmsnorm_gemv": 18 + 6 + 1, "gemma_rmsnorm_gemv_swiglu": 24, "gemv_add": 48}
    for op in calls:
        d = stats[op]
        assert d["tuned"] + d["bucket"] + d["inferred"] + d["fallback"] == d["calls"]
    assert stats["gemv_add"]["fallback"] == 0  # the table tuned both gemv_add shapes at M = 1


@pytest.mark.gpu
@pytest.mark.parametrize("B", [1, 3, 16])
def test_fused_step_on_the_gpu_agrees_with_eager(B):
    # the real fused calls of the shipped fused table on the GPU, bf16, the
    # full config: B = 1 and 16 tuned, 3 untuned (the fused calls run the
    # unfused sequence, gemv_add the bucket of 4);
    # the step's hidden state, logits and carried state agree with eager's
    # on every token row, and every call was served (tuned, a bucket, or the
    # unfused sequence: never an error)
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch")
    atk = pytest.importorskip("atk", reason="the atk package (python/) is not installed here")
    fused_db = decode.DEFAULT_DB.parent / "qwen3.5-2b-h200-fused.json"
    t = atk.open(str(fused_db))
    with t:
        if t.explain("gemv", "bf16", 1, 2048, 2048).path != "tuned":
            pytest.skip(f"the shipped table has no entries for {torch.cuda.get_device_name()} (tuned on an H200)")
        m = M.make_model(M.QWEN35_2B, dtype=torch.bfloat16, device="cuda", seed=5)
        with torch.inference_mode():
            ref = m(B)
            ref_state = [mod.state.clone() for mod in m.modules() if isinstance(mod, M.LinearAttention)]
            m.reset_state()
            before = t.stats()
            r, logits = m.forward_fused(B, t)
            torch.cuda.synchronize()
            calls = decode.stats_delta(before, t.stats())
            c = decode.compare((m.hidden_of(r), logits), ref, decode.TOLERANCE)
            state = [mod.state for mod in m.modules() if isinstance(mod, M.LinearAttention)]
    assert c["agree"], c
    for a, b in zip(state, ref_state):
        assert ((a - b).norm() / b.norm()).item() < decode.TOLERANCE
    assert {op: d["calls"] for op, d in calls.items()} == {
        "gemma_rmsnorm_gemv": 18 + 6 + 1, "gemma_rmsnorm_gemv_swiglu": 24, "gemv_add": 48}
    for op, d in calls.items():
        assert d["tuned"] + d["bucket"] + d["inferred"] + d["fallback"] == d["calls"], (op, d)


# ------------------------------------------------------------------ the harness

def test_row_errors_find_the_worst_row_and_nan():
    ref = torch.ones(3, 4)
    x = ref.clone()
    x[1, 2] = 1.5
    e = decode.row_errors(x, ref)
    assert e["row"] == 1 and e["rel_err"] == pytest.approx(0.25) and e["max_abs"] == pytest.approx(0.5)
    x[2, 0] = float("nan")
    e = decode.row_errors(x, ref)
    assert e["row"] == 2 and e["rel_err"] == math.inf
    assert decode.compare((x, ref), (ref, ref), 5e-2)["agree"] is False


class FakeGraph:
    """A CPU stand-in for a captured CUDA graph: replay recomputes fn and
    writes into the outputs of the 'capture', as a replay overwrites them."""

    def __init__(self, fn):
        self.fn = fn
        self.out = fn()

    def replay(self):
        for o, n in zip(self.out, self.fn()):
            o.copy_(n)


def fake_harness(monkeypatch, perturb=0.0):
    @contextmanager
    def patch(model, table):  # atk mode: the same model; a capture under it counts one step's calls
        table.patched = True
        yield
        table.patched = False

    def capture(fn, warmup=2):
        table.calls += 97 if table.patched else 0
        g = FakeGraph(fn)
        return g, g.out

    monkeypatch.setattr(decode, "capture", capture)
    monkeypatch.setattr(decode, "warm_up", lambda fn, calls=2: None)
    monkeypatch.setattr(decode, "time_round", lambda fn, steps: [fn() for _ in range(steps)] and 100.0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    table = types.SimpleNamespace(calls=0, patched=False)
    table.stats = lambda: {"gemv": {"calls": table.calls, "tuned": table.calls, "fallback": 0}}
    atk = types.SimpleNamespace(patch=patch)
    if perturb:
        real = FakeGraph.replay
        monkeypatch.setattr(FakeGraph, "replay", lambda self: (real(self), self.out[1].add_(perturb)))
    return table, atk


def test_run_batch_checks_every_mode_and_reports(monkeypatch, tiny, capsys):
    table, atk = fake_harness(monkeypatch)
    args = decode.parse_args(["--steps", "2", "--rounds", "3", "--no-atk"])
    modes = {"eager": None, "graph": None, "atk_graph": None, "compile_graph": tiny}
    with torch.inference_mode():
        r = decode.run_batch(tiny, 3, modes, args, table, atk)
    assert set(r["modes"]) == set(modes) and r["agree"] is True
    assert r["modes"]["eager"]["check"] is None  # the reference
    assert r["modes"]["graph"]["check"]["logits_rel_err"] == 0.0
    assert r["modes"]["atk_graph"]["tokens_per_s"] == pytest.approx(3e6 / 100.0)
    assert r["modes"]["atk_graph"]["ratio_to_graph"] == pytest.approx(1.0)
    assert r["atk_paths"] == {"gemv": {"calls": 97, "tuned": 97, "fallback": 0}}
    decode.print_report(sys.stdout, [r], args, decode.per_step_calls(tiny))
    text = capsys.readouterr().out
    assert "(c) atk.patch + CUDA graph" in text and "agree" in text and "DIFFER" not in text
    assert "atk took 97 of the step's 9 GEMVs and 0 of its 5 norms" in text  # the fake's counts, tiny's modules
    assert json.loads(json.dumps(decode.jsonable(r)))["B"] == 3


def test_run_batch_checks_the_fused_mode(monkeypatch, tiny, capsys):
    # (f): the captured step is forward_fused; its hidden state comes from the
    # residual it returns, and its calls are counted apart from (c)'s
    _, atk = fake_harness(monkeypatch)
    t = TorchFused()
    t.stats = lambda: {op: {"calls": n, "tuned": n, "fallback": 0} for op, n in t.calls.items()}
    args = decode.parse_args(["--steps", "1", "--rounds", "2", "--fused"])
    with torch.inference_mode():
        r = decode.run_batch(tiny, 2, {"eager": None, "graph": None, "atk_fused_graph": None}, args, t, atk)
    assert r["agree"] is True
    assert r["modes"]["atk_fused_graph"]["check"]["hidden_rel_err"] < 1e-5
    assert r["atk_paths"] is None
    assert r["atk_fused_paths"] == {"gemma_rmsnorm_gemv": {"calls": 3, "tuned": 3, "fallback": 0},
                                    "gemma_rmsnorm_gemv_swiglu": {"calls": 2, "tuned": 2, "fallback": 0},
                                    "gemv_add": {"calls": 4, "tuned": 4, "fallback": 0}}
    decode.print_report(sys.stdout, [r], args)
    text = capsys.readouterr().out
    assert "(f) atk fused calls + CUDA graph" in text and "DIFFER" not in text
    assert "(f)'s atk calls in one captured step (calls/tuned/bucket/inferred/fallback): gemma_rmsnorm_gemv " \
           "3/3/0/0/0" in text


def test_run_batch_flags_a_mode_that_differs(monkeypatch, tiny, capsys):
    table, atk = fake_harness(monkeypatch, perturb=1.0)  # every replayed logit off by 1
    args = decode.parse_args(["--steps", "1", "--rounds", "1", "--no-atk"])
    with torch.inference_mode():
        r = decode.run_batch(tiny, 2, {"eager": None, "graph": None}, args, table, atk)
    assert r["agree"] is False and r["modes"]["graph"]["check"]["logits_max_abs"] == pytest.approx(1.0)
    decode.print_report(sys.stdout, [r], args)
    assert "DIFFER" in capsys.readouterr().out


# ------------------------------------------------------------------ the CLI

def cli(*argv):
    return subprocess.run([sys.executable, str(HERE / "decode.py"), *argv], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("argv, message", [
    (["--batch", "1,0"], "--batch: '1,0': 0 is out of range 1..64"),
    (["--batch", "1,2,1"], "1 is repeated"),
    (["--batch", "two"], "'two' is not an integer"),
    (["--batch", ""], "empty list"),
    (["--steps", "0"], "--steps: 0 is out of range"),
    (["--rounds", "x"], "--rounds: 'x' is not an integer"),
    (["--tolerance", "-1"], "--tolerance: -1 must be a positive number"),
    (["--frob"], "unrecognized arguments: --frob"),
    (["--db", "/nonexistent/table.json"], "--db '/nonexistent/table.json': no such file"),
    (["--no-atk", "--fused"], "--fused runs atk's fused calls: drop --no-atk"),
    (["--no-atk", "--overhead"], "--overhead compares torch with atk"),
    (["--no-atk", "--json", "/nonexistent/dir/out.json"], "--json '/nonexistent/dir/out.json'"),
])
def test_bad_arguments_exit_2_naming_them(argv, message):
    r = cli(*argv)
    assert r.returncode == 2
    assert message in r.stderr
    assert r.stdout == ""


def test_help_exits_0():
    r = cli("--help")
    assert r.returncode == 0 and "--batch" in r.stdout and "--overhead" in r.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_no_gpu_exits_1_with_a_message():
    r = cli("--no-atk")
    assert r.returncode == 1 and "no CUDA GPU" in r.stderr


def dry_table():
    """A dry atk table of the shipped H200 table (no GPU needed), or a
    visible skip without the package or libatk.so."""
    atk = pytest.importorskip("atk", reason="the atk package (python/) is not installed here")
    try:
        return atk, atk.open_dry(str(decode.DEFAULT_DB))
    except atk.LibraryNotFound as e:
        pytest.skip(f"libatk.so not found (set ATK_LIB): {e}")


def test_patch_falls_back_on_the_cpu():
    # a dry table serves nothing on the CPU: the patched model gives the
    # unpatched one's outputs
    atk, t = dry_table()
    m = M.make_model(M.TINY, dtype=torch.float32, device="cpu")
    with torch.inference_mode():
        ref = m(2)
        m.reset_state()
        with t, atk.patch(m, t):
            got = m(2)
    assert torch.equal(ref[1], got[1])


def test_patch_routes_every_gemv_and_norm_of_a_step():
    # on meta tensors a dry table counts what a GPU step would call: the 97
    # GEMVs and the 49 residual-add norms (GemmaRMSNorm's add form must map
    # to add_gemma_rmsnorm), all served by the shipped table
    atk, t = dry_table()
    with torch.device("meta"):
        m = M.DecodeModel(M.QWEN35_2B)
    with t, atk.patch(m, t) as p, torch.inference_mode():
        assert len(p.summary().splitlines()) >= 1
        m(4)
        stats = t.stats()
    assert stats["gemv"]["calls"] == 97 and stats["gemv"]["fallback"] == 0
    assert stats["add_gemma_rmsnorm"]["calls"] == 49 and stats["add_gemma_rmsnorm"]["fallback"] == 0


def test_standins_off_reads_a_fixed_buffer_and_keeps_the_gemvs():
    import model as mdl
    m = mdl.make_model(mdl.TINY, dtype=torch.float32, device="cpu", seed=3)
    with torch.no_grad():
        on = m(2)
        m.reset_state()
        m.set_standins(False)
        off1 = m(2)
        m.reset_state()
        off2 = m(2)
    assert off1[1].shape == on[1].shape
    assert not torch.equal(off1[0], on[0])           # the stand-ins changed the result
    assert torch.equal(off1[0], off2[0])             # and without them the step is deterministic
    assert all(torch.isfinite(t).all() for t in off1)
    frozen = [mod.frozen for mod in m.modules() if hasattr(mod, "frozen")]
    assert frozen and all(f.abs().sum() > 0 for f in frozen)  # never zeros
