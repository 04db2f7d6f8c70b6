"""atk.patch on small CPU and meta models with a dry table: which modules
are patched, CPU calls take each module's own path with identical results,
meta calls on served shapes go through the table (counted), and undo()
restores the original forwards exactly."""

import pytest
import torch
from torch import nn

import atk

BF = torch.bfloat16


class MyRMSNorm(nn.Module):
    """An RMSNorm in the Llama style (weight * normalized)."""

    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(h) * 0.1 + 1)
        self.variance_epsilon = eps

    def forward(self, x):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return (self.weight.float() * (x.float() * torch.rsqrt(v + self.variance_epsilon))).to(x.dtype)


class GemmaRMSNorm(MyRMSNorm):
    """Gemma style: weight factor (1 + w)."""

    def forward(self, x):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return ((1 + self.weight.float()) * (x.float() * torch.rsqrt(v + self.variance_epsilon))).to(x.dtype)


class TaggedRMSNorm(GemmaRMSNorm):
    atk_norm = "gemma"


class Scale(nn.Module):
    """Not a norm by name: patched only when `norms` names it."""

    def __init__(self, h):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = 1e-6

    def forward(self, x):
        return x * self.weight


class Block(nn.Module):
    def __init__(self, h=2048, n=32):
        super().__init__()
        self.norm = GemmaRMSNorm(h)
        self.proj = nn.Linear(h, h, bias=False)
        self.tagged = TaggedRMSNorm(h)
        self.plain = MyRMSNorm(h)
        self.scale = Scale(h)
        self.ln = nn.LayerNorm(h)
        self.head = nn.Linear(h, n, bias=True)

    def forward(self, x):
        x = self.proj(self.norm(x))
        x = self.plain(self.tagged(x))
        x = self.ln(self.scale(x))
        return self.head(x)


def model(dtype=torch.float32, device="cpu"):
    torch.manual_seed(0)
    return Block().to(dtype=dtype, device=device)


def test_which_modules_are_patched(dry):
    m = model()
    p = atk.patch(m, dry)
    assert dict(p.patched) == {"norm": "gemma_rmsnorm", "proj": "gemv", "tagged": "gemma_rmsnorm",
                               "plain": "rmsnorm", "head": "gemv"}
    s = p.summary()
    assert "5 modules" in s and "head: Linear -> gemv" in s and "norm: GemmaRMSNorm -> gemma_rmsnorm" in s
    p.undo()


def test_norms_mapping(dry):
    m = model()
    p = atk.patch(m, dry, norms={Scale: "rmsnorm", "GemmaRMSNorm": None, (lambda name: name == "plain"): "gemma"})
    got = dict(p.patched)
    assert got["scale"] == "rmsnorm" and got["plain"] == "gemma_rmsnorm"
    assert "norm" not in got and got["tagged"] == "gemma_rmsnorm"
    p.undo()
    with pytest.raises(ValueError, match="must be 'rmsnorm', 'gemma' or None"):
        atk.patch(m, dry, norms={Scale: "layer"})


@pytest.mark.parametrize("dtype", [torch.float32, BF])
def test_cpu_calls_take_the_modules_own_path(dry, dtype):
    m = model(dtype)
    x = torch.randn(3, 2048, dtype=dtype)
    with torch.no_grad():
        want = m(x)
        with atk.patch(m, dry):
            got = m(x)
    assert torch.equal(got, want)
    assert all(d["calls"] == 0 for d in dry.stats().values())


def test_meta_calls_go_through_a_dry_table(dry):
    m = model(BF, "meta")
    with atk.patch(m, dry):
        y = m(torch.empty(1, 2048, dtype=BF, device="meta"))       # served shapes: counted
        m(torch.empty(40, 2048, dtype=BF, device="meta"))          # M=40: every gemv falls back
    assert y.shape == (1, 32)
    s = dry.stats()
    # proj 1x2048x2048 and head 1x2048x32 tuned; norm and tagged gemma T=1 tuned;
    # plain rmsnorm is not in the table: its own forward, uncounted
    assert s["gemv"]["calls"] == 2 and s["gemv"]["tuned"] == 2
    # gemma norms: T=1 tuned twice, T=40 bucket (T=128) twice
    assert s["gemma_rmsnorm"] == {"calls": 4, "tuned": 2, "bucket": 2, "inferred": 0, "fallback": 0, "missed": 0,
                                  "rejected": 0}
    assert s["rmsnorm"]["calls"] == 0


def test_undo_restores_exactly(dry):
    m = model()
    own = lambda x: x  # noqa: E731  an instance forward set before patching must come back as is
    m.ln.forward = own
    mods = dict(m.named_modules())
    before = {n: mod.__dict__.get("forward") for n, mod in mods.items()}
    p = atk.patch(m, dry, norms={nn.LayerNorm: "rmsnorm"})
    assert "ln" in dict(p.patched)
    assert all("forward" in mods[n].__dict__ for n, _ in p.patched)
    p.undo()
    for n, mod in mods.items():
        assert mod.__dict__.get("forward") is before[n], n
    assert m.ln.forward is own
    assert m.proj.forward.__func__ is nn.Linear.forward
    assert "forward" not in m.proj.__dict__
    p.undo()  # a second undo is a no-op


def test_patching_twice_leaves_patched_modules(dry):
    m = model()
    p1 = atk.patch(m, dry)
    p2 = atk.patch(m, dry)
    assert p2.patched == []
    p1.undo()
    assert "forward" not in m.proj.__dict__


def test_closed_table_is_refused():
    t = atk.open_dry(__import__("conftest").TABLE)
    t.close()
    with pytest.raises(atk.AtkError, match="closed"):
        atk.patch(model(), t)


def test_compile_fullgraph_of_a_patched_model(dry):
    m = model(BF, "meta")
    with atk.patch(m, dry), torch.no_grad():  # the ops are for inference: no autograd formula
        f = torch.compile(m, fullgraph=True, backend="aot_eager")
        y = f(torch.empty(1, 2048, dtype=BF, device="meta"))
    assert y.shape == (1, 32) and y.dtype == BF


def test_patch_name_after_importing_the_submodule(dry):
    # `import atk.patch` first in a process binds the name atk.patch to the
    # module, not the function: the module must patch too
    import importlib
    mod = importlib.import_module("atk.patch")
    p = mod(model(), dry)
    assert len(p.patched) == 5 and isinstance(p, mod.Patch)
    p.undo()


class AddGemmaRMSNorm(nn.Module):
    """vLLM's contract: forward(x, residual) adds x into residual in place
    and returns (norm(residual), residual); forward(x) is the plain norm."""

    atk_norm = "gemma"

    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(h) * 0.1)
        self.eps = eps

    def forward(self, x, residual=None):
        src = x
        if residual is not None:
            residual.add_(x)
            src = residual
        v = src.float()
        y = ((1 + self.weight.float()) * (v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + self.eps))).to(x.dtype)
        return y if residual is None else (y, residual)


@pytest.mark.parametrize("how", ["positional", "keyword"])
def test_residual_form_runs_the_add_op(dry, how):
    m = AddGemmaRMSNorm(2048).to(dtype=BF, device="meta")
    x = torch.empty(1, 2048, dtype=BF, device="meta")
    r = torch.empty(1, 2048, dtype=BF, device="meta")
    with atk.patch(m, dry) as p:
        assert dict(p.patched) == {"": "gemma_rmsnorm"}
        y, r2 = m(x, r) if how == "positional" else m(x, residual=r)
        assert r2 is r and y.shape == x.shape and y.dtype == BF
        m(x)  # the plain form
    s = dry.stats()
    assert s["add_gemma_rmsnorm"]["calls"] == 1 and s["add_gemma_rmsnorm"]["tuned"] == 1
    assert s["gemma_rmsnorm"]["calls"] == 1


def test_residual_form_on_cpu_is_the_modules_own(dry):
    torch.manual_seed(1)
    m = AddGemmaRMSNorm(2048).to(BF)
    x = torch.randn(3, 2048, dtype=BF)
    r0 = torch.randn(3, 2048, dtype=BF)
    want_r = r0.clone()
    with torch.no_grad():
        want_y, _ = m(x, want_r)
        got_r = r0.clone()
        with atk.patch(m, dry):
            got_y, got_r2 = m(x, got_r)
    assert got_r2 is got_r and torch.equal(got_r, want_r) and torch.equal(got_y, want_y)
    assert all(d["calls"] == 0 for d in dry.stats().values())


def test_compile_fullgraph_of_the_residual_form(dry):
    m = AddGemmaRMSNorm(2048).to(dtype=BF, device="meta")
    x = torch.empty(1, 2048, dtype=BF, device="meta")
    r = torch.empty(1, 2048, dtype=BF, device="meta")
    with atk.patch(m, dry), torch.no_grad():
        y, r2 = torch.compile(m, fullgraph=True, backend="aot_eager")(x, r)
    assert y.shape == x.shape and r2.shape == r.shape
