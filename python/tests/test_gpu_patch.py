"""atk.patch of a small bf16 Linear/RMSNorm model on the GPU: logits match
the unpatched model on served shapes (through the table) and on fallback
shapes (the modules' own forwards), eager and under torch.compile."""

import pytest
import torch
from torch import nn

import atk
from test_gpu_ops import TOL, rel_err
from test_patch import GemmaRMSNorm, MyRMSNorm

pytestmark = pytest.mark.gpu

BF = torch.bfloat16


class Tiny(nn.Module):
    def __init__(self, h=2048, vocab=32):
        super().__init__()
        self.norm1 = GemmaRMSNorm(h)
        self.up = nn.Linear(h, 5120, bias=False)
        self.down = nn.Linear(5120, h, bias=False)  # K=5120: not in the table (inferred or fallback)
        self.norm2 = GemmaRMSNorm(h)
        self.plain = MyRMSNorm(h)                   # plain rmsnorm: not in the table, own forward
        self.head = nn.Linear(h, vocab, bias=True)

    def forward(self, x):
        x = x + self.down(torch.relu(self.up(self.norm1(x))))
        return self.head(self.plain(self.norm2(x)))


def tiny():
    torch.manual_seed(0)
    m = Tiny().to(device="cuda", dtype=BF).eval()
    with torch.no_grad():
        for lin in (m.up, m.down, m.head):
            lin.weight.mul_(3.0)
    return m


@pytest.mark.parametrize("M", [1, 3, 40])
def test_patched_logits_match(gpu_table, M):
    t = gpu_table
    m = tiny()
    x = torch.randn(M, 2048, dtype=BF, device="cuda")
    with torch.no_grad():
        want = m(x)
        t.reset_stats()
        with atk.patch(m, t) as p:
            assert {n for n, _ in p.patched} == {"norm1", "up", "down", "norm2", "plain", "head"}
            got = m(x)
    torch.cuda.synchronize()
    assert rel_err(got, want.float()) <= 2 * TOL[BF]
    s = t.stats()
    served_gemv = sum(t.serves("gemv", BF, M, lin.in_features, lin.out_features) for lin in (m.up, m.down, m.head))
    assert s["gemv"]["calls"] == served_gemv
    assert s["gemv"]["fallback"] == 0  # a fallback shape runs the module's own forward, never atk's
    assert s["gemma_rmsnorm"]["calls"] == 2 and s["rmsnorm"]["calls"] == 0
    if M == 1:
        assert served_gemv >= 2  # up (1x2048x5120) and head (1x2048x32) are tuned
    assert "forward" not in m.up.__dict__  # undone on leaving the with block


def test_patched_model_under_compile(gpu_table):
    m = tiny()
    x = torch.randn(1, 2048, dtype=BF, device="cuda")
    with torch.no_grad():
        want = m(x)
        with atk.patch(m, gpu_table):
            got = torch.compile(m, fullgraph=True)(x)
    torch.cuda.synchronize()
    assert rel_err(got, want.float()) <= 2 * TOL[BF]
