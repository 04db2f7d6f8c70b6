"""examples/torch_decode/model.py — a Qwen3.5-2B-shaped decode stack in
PyTorch with synthetic random weights, the twin of the C engine's model
(examples/decode/model.c): the same shapes, the same Gemma RMSNorm with the
residual add, and the same stand-ins for the attention core and the
linear-attention recurrence (see README.md for what is a stand-in).
Invariant: every GEMV is an nn.Linear without bias and every norm a
GemmaRMSNorm, so atk.patch can replace both; activations are [B, width].
DecodeModel.forward_fused is the same step through atk's fused calls (the C
engine's mode 4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class Config:
    """The stack's dimensions. The defaults are the C engine's (model.h):
    hidden 2048, 24 layers (18 linear-attention, 6 full-attention, 3:1),
    intermediate 6144, vocab 248320; 8 query and 2 key/value heads of 256;
    16 linear-attention heads of 128. max_batch: the rows the fixed buffers
    (token embeddings, linear-attention states) hold."""

    hidden: int = 2048
    layers: int = 24
    inter: int = 6144
    vocab: int = 248320
    attn_heads: int = 8
    kv_heads: int = 2
    lin_heads: int = 16
    full_every: int = 4  # layer l is full attention when l % full_every == full_every - 1
    eps: float = 1e-6
    max_batch: int = 16

    def __post_init__(self):
        for name in ("hidden", "layers", "inter", "vocab", "attn_heads", "kv_heads", "lin_heads", "full_every",
                     "max_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"Config.{name} = {getattr(self, name)}: must be >= 1")
        if self.hidden % self.attn_heads or self.attn_heads % self.kv_heads:
            raise ValueError(f"Config: hidden {self.hidden} must split into attn_heads {self.attn_heads}, "
                             f"a multiple of kv_heads {self.kv_heads}")
        if self.hidden % self.lin_heads:
            raise ValueError(f"Config: hidden {self.hidden} must split into lin_heads {self.lin_heads}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.attn_heads

    @property
    def lin_dim(self) -> int:
        return self.hidden // self.lin_heads

    @property
    def qkvg(self) -> int:
        """Full attention's projection: q and gate (hidden each), k and v."""
        return 2 * self.hidden + 2 * self.kv_heads * self.head_dim

    @property
    def qkvz(self) -> int:
        """Linear attention's projection: q, k, v, z (hidden each)."""
        return 4 * self.hidden

    @property
    def ba(self) -> int:
        """Linear attention's beta and decay, one each per head."""
        return 2 * self.lin_heads

    @property
    def qkvzba(self) -> int:
        """Linear attention's one input projection: qkvz's rows, then ba's."""
        return self.qkvz + self.ba

    def is_linear(self, layer: int) -> bool:
        return layer % self.full_every != self.full_every - 1


# The C engine's stack; a tiny one of the same code for tests on the CPU.
QWEN35_2B = Config()
TINY = Config(hidden=64, layers=2, inter=128, vocab=100, full_every=2, max_batch=4)


def gemma_rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """rmsnorm(x) * (1 + weight) in fp32 from x as stored, rounded once to
    x's dtype, as the C kernels (and atk's fused calls' prologue) do."""
    v = x.float()
    return (v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + weight.float())).to(x.dtype)


class GemmaRMSNorm(nn.Module):
    """RMSNorm scaled by (1 + weight) (Qwen3-Next's zero-centred norm), with
    an optional residual add first — the contract atk.patch maps:

      forward(x)           -> y = rmsnorm(x) * (1 + weight)
                              (atk: t.gemma_rmsnorm(x, weight, eps))
      forward(x, residual) -> (y, residual): residual is updated IN PLACE to
                              x + residual (rounded to its dtype) and
                              returned; y = rmsnorm(residual) * (1 + weight)
                              (atk: t.add_gemma_rmsnorm(x, residual, weight,
                              eps), which updates residual in place too)

    Rounding as the C kernels: the sum rounded once to the dtype, then the
    norm in fp32 from that rounded value, y rounded once. `atk_norm` and the
    class name mark it Gemma-style for atk.patch's autodetection."""

    atk_norm = "gemma"

    def __init__(self, hidden: int, eps: float = 1e-6, dtype=None, device=None):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(hidden, dtype=dtype, device=device))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        src = x
        if residual is not None:
            residual.add_(x)
            src = residual
        y = gemma_rmsnorm(src, self.weight, self.eps)
        return y if residual is None else (y, residual)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def standin_attention(qkvg: torch.Tensor, cfg: Config) -> torch.Tensor:
    """Attention at a sequence's first position (one key: softmax = 1), the C
    stand-in standin_attn: out = v (GQA: each key/value head serves
    attn_heads / kv_heads query heads) * sigmoid(gate). qkvg [B, cfg.qkvg]
    laid out q | gate | k | v; returns [B, hidden] in qkvg's dtype."""
    B, H = qkvg.shape[0], cfg.hidden
    f = qkvg.float()
    gate = f[:, H:2 * H]
    v = f[:, 2 * H + cfg.kv_heads * cfg.head_dim:].reshape(B, cfg.kv_heads, 1, cfg.head_dim)
    v = v.expand(B, cfg.kv_heads, cfg.attn_heads // cfg.kv_heads, cfg.head_dim).reshape(B, H)
    return (v * torch.sigmoid(gate)).to(qkvg.dtype)


def standin_linear(qkvz: torch.Tensor, ba: torch.Tensor, state: torch.Tensor, cfg: Config) -> torch.Tensor:
    """A gated linear recurrence per head, the C stand-in standin_linear:
    S = decay * S + beta * k v^T; out = (q S) * silu(z), with q and k scaled
    by 1/sqrt(lin_dim), beta = sigmoid(ba[:heads]), decay =
    sigmoid(ba[heads:]). qkvz [B, 4 * hidden] laid out q | k | v | z; ba [B,
    2 * lin_heads]; state [B, lin_heads, lin_dim, lin_dim] fp32, one per
    sequence, updated in place. Returns [B, hidden] in qkvz's dtype."""
    B, Hn, D = qkvz.shape[0], cfg.lin_heads, cfg.lin_dim
    f = qkvz.float().reshape(B, 4, Hn, D)
    scale = 1.0 / math.sqrt(D)
    q, k, v, z = f[:, 0] * scale, f[:, 1] * scale, f[:, 2], f[:, 3]
    g = ba.float()
    beta, decay = torch.sigmoid(g[:, :Hn]), torch.sigmoid(g[:, Hn:2 * Hn])
    state.mul_(decay[:, :, None, None]).add_((beta[:, :, None] * k)[:, :, :, None] * v[:, :, None, :])
    out = torch.matmul(q.unsqueeze(2), state).squeeze(2)  # [B, Hn, D]: sum_i q[i] S[i, j]
    return (out * F.silu(z)).reshape(B, Hn * D).to(qkvz.dtype)


def silu_mul(gate_up: torch.Tensor, inter: int) -> torch.Tensor:
    """SiLU(gate) * up from the concatenated [B, 2 * inter] gate_up, in fp32
    and rounded once, as the C kernel."""
    f = gate_up.float()
    return (F.silu(f[:, :inter]) * f[:, inter:]).to(gate_up.dtype)


def _add_frozen(mod: nn.Module, rows: int, width: int, dtype, device) -> None:
    """What a module's stand-in stage yields when stand-ins are off
    (DecodeModel.set_standins(False)): a fixed random [rows, width] buffer,
    read without a kernel, so a step times its GEMVs and norms alone (the C
    engine's --no-standins)."""
    mod.standin = True
    mod.register_buffer("frozen", torch.zeros(rows, width, dtype=dtype, device=device), persistent=False)


class FullAttention(nn.Module):
    """2048 -> 5120 (q, gate, k, v), the attention stand-in, 2048 -> 2048."""

    def __init__(self, cfg: Config, dtype=None, device=None):
        super().__init__()
        self.cfg = cfg
        self.qkvg_proj = nn.Linear(cfg.hidden, cfg.qkvg, bias=False, dtype=dtype, device=device)
        self.o_proj = nn.Linear(cfg.hidden, cfg.hidden, bias=False, dtype=dtype, device=device)
        _add_frozen(self, cfg.max_batch, cfg.hidden, dtype, device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkvg = self.qkvg_proj(x)
        a = standin_attention(qkvg, self.cfg) if self.standin else self.frozen[:x.shape[0]]
        return self.o_proj(a)


class LinearAttention(nn.Module):
    """2048 -> 8224: in_proj_qkvz (q, k, v, z; 8192 rows) and in_proj_ba
    (beta, decay; 32 rows) as one weight, one GEMV, as the C engine and as
    engines concatenate q/k/v; the recurrence stand-in over a fp32 state per
    sequence slot; 2048 -> 2048."""

    def __init__(self, cfg: Config, dtype=None, device=None):
        super().__init__()
        self.cfg = cfg
        self.in_proj_qkvzba = nn.Linear(cfg.hidden, cfg.qkvzba, bias=False, dtype=dtype, device=device)
        self.out_proj = nn.Linear(cfg.hidden, cfg.hidden, bias=False, dtype=dtype, device=device)
        self.register_buffer("state", torch.zeros(cfg.max_batch, cfg.lin_heads, cfg.lin_dim, cfg.lin_dim,
                                                  dtype=torch.float32, device=device), persistent=False)
        _add_frozen(self, cfg.max_batch, cfg.hidden, dtype, device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        state = self.state[:x.shape[0]]  # token t is sequence slot t
        qkvz, ba = self.in_proj_qkvzba(x).split((self.cfg.qkvz, self.cfg.ba), dim=1)
        a = standin_linear(qkvz, ba, state, self.cfg) if self.standin else self.frozen[:x.shape[0]]
        return self.out_proj(a)


class MLP(nn.Module):
    """2048 -> 12288 (gate and up, one weight), SiLU * mul, 6144 -> 2048."""

    def __init__(self, cfg: Config, dtype=None, device=None):
        super().__init__()
        self.inter = cfg.inter
        self.gate_up_proj = nn.Linear(cfg.hidden, 2 * cfg.inter, bias=False, dtype=dtype, device=device)
        self.down_proj = nn.Linear(cfg.inter, cfg.hidden, bias=False, dtype=dtype, device=device)
        _add_frozen(self, cfg.max_batch, cfg.inter, dtype, device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up = self.gate_up_proj(x)
        return self.down_proj(silu_mul(gate_up, self.inter) if self.standin else self.frozen[:x.shape[0]])


class DecodeLayer(nn.Module):
    """add + norm -> (linear) attention -> add + norm -> MLP. Takes the
    previous block's output and the residual stream, returns this block's
    output and the stream (the add happens in the next norm)."""

    def __init__(self, cfg: Config, index: int, dtype=None, device=None):
        super().__init__()
        self.linear = cfg.is_linear(index)
        self.input_norm = GemmaRMSNorm(cfg.hidden, cfg.eps, dtype=dtype, device=device)
        self.mixer = (LinearAttention if self.linear else FullAttention)(cfg, dtype=dtype, device=device)
        self.post_norm = GemmaRMSNorm(cfg.hidden, cfg.eps, dtype=dtype, device=device)
        self.mlp = MLP(cfg, dtype=dtype, device=device)

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        h, residual = self.input_norm(x, residual)
        h, residual = self.post_norm(self.mixer(h), residual)
        return self.mlp(h), residual


class DecodeModel(nn.Module):
    """The stack. forward(B) runs one decode step of B tokens (1..max_batch,
    one per sequence; row t of `embed` is token t, the residual stream starts
    at zero as in the C engine) and returns (hidden, logits): the final
    norm's output [B, hidden] and the lm_head's [B, vocab]. Each step
    advances the linear-attention states of slots 0..B-1 (reset_state zeroes
    them). Build with make_model (weights are not initialised here)."""

    def __init__(self, cfg: Config, dtype=torch.bfloat16, device=None):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList(DecodeLayer(cfg, i, dtype=dtype, device=device) for i in range(cfg.layers))
        self.norm = GemmaRMSNorm(cfg.hidden, cfg.eps, dtype=dtype, device=device)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False, dtype=dtype, device=device)
        self.register_buffer("embed", torch.zeros(cfg.max_batch, cfg.hidden, dtype=dtype, device=device),
                             persistent=False)

    def forward(self, B: int):
        if not 1 <= B <= self.cfg.max_batch:
            raise ValueError(f"a step of B = {B} tokens: out of range 1..{self.cfg.max_batch}")
        x = self.embed[:B]
        residual = torch.zeros_like(x)
        for layer in self.layers:
            x, residual = layer(x, residual)
        hidden, _ = self.norm(x, residual)
        return hidden, self.lm_head(hidden)

    def forward_fused(self, B: int, t):
        """One decode step as the C engine's mode (4), through the fused calls
        of atk table t: each norm in the prologue of the GEMV that reads it
        (t.gemma_rmsnorm_gemv; the MLP's gate_up with SwiGLU in its epilogue,
        t.gemma_rmsnorm_gemv_swiglu over the weight's gate and up halves),
        each residual add in the epilogue of the GEMV that makes the delta
        (t.gemv_add), so no add, norm or SiLU*mul runs between the GEMVs.
        The residual stream starts at the embeddings (what forward's first
        add makes of zero). Returns (residual, logits): the stream after the
        last layer (hidden_of gives forward's hidden from it) and the
        logits. t's tensors on its GPU (a dry table: meta tensors); any
        object with those three methods serves (the tests' torch one)."""
        if not 1 <= B <= self.cfg.max_batch:
            raise ValueError(f"a step of B = {B} tokens: out of range 1..{self.cfg.max_batch}")
        r = self.embed[:B].clone()
        for layer in self.layers:
            mix, mlp = layer.mixer, layer.mlp
            w1, eps1 = layer.input_norm.weight, layer.input_norm.eps
            if layer.linear:
                qkvzba = t.gemma_rmsnorm_gemv(r, w1, mix.in_proj_qkvzba.weight, eps1)
                qkvz, ba = qkvzba.split((self.cfg.qkvz, self.cfg.ba), dim=1)
                a = standin_linear(qkvz, ba, mix.state[:B], self.cfg) if mix.standin else mix.frozen[:B]
                t.gemv_add(a, mix.out_proj.weight, r)
            else:
                qkvg = t.gemma_rmsnorm_gemv(r, w1, mix.qkvg_proj.weight, eps1)
                a = standin_attention(qkvg, self.cfg) if mix.standin else mix.frozen[:B]
                t.gemv_add(a, mix.o_proj.weight, r)
            W = mlp.gate_up_proj.weight  # [2 * inter, hidden]: the gate rows, then the up rows
            act = t.gemma_rmsnorm_gemv_swiglu(r, layer.post_norm.weight, W[:mlp.inter], W[mlp.inter:],
                                              layer.post_norm.eps)
            t.gemv_add(act if mlp.standin else mlp.frozen[:B], mlp.down_proj.weight, r)
        return r, t.gemma_rmsnorm_gemv(r, self.norm.weight, self.lm_head.weight, self.norm.eps)

    def hidden_of(self, residual: torch.Tensor) -> torch.Tensor:
        """The final norm's output from the residual stream after the last
        layer: forward's hidden, for forward_fused's check."""
        return self.norm(residual)

    @torch.no_grad()
    def init_weights(self, seed: int = 1) -> None:
        """Random weights as the C engine's: every Linear [N, K] uniform with
        variance 1/K (+-sqrt(3/K)), so activations keep their scale through
        the layers; norm weights +-0.1; token embeddings +-1; states zero.
        Generated on the model's device (fast on a GPU)."""
        dev = self.embed.device
        gen = torch.Generator(device=dev)
        gen.manual_seed(seed)
        for mod in self.modules():
            if isinstance(mod, nn.Linear):
                a = math.sqrt(3.0 / mod.in_features)
                mod.weight.uniform_(-a, a, generator=gen)
            elif isinstance(mod, GemmaRMSNorm):
                mod.weight.uniform_(-0.1, 0.1, generator=gen)
        self.embed.uniform_(-1.0, 1.0, generator=gen)
        for mod in self.modules():
            if hasattr(mod, "frozen"):
                mod.frozen.uniform_(-1.0, 1.0, generator=gen)
        self.reset_state()

    def set_standins(self, on: bool) -> None:
        """Runs the attention and recurrence stand-ins and SiLU*mul (True,
        the default), or reads a fixed random buffer in their place."""
        for mod in self.modules():
            if hasattr(mod, "frozen"):
                mod.standin = bool(on)

    @torch.no_grad()
    def reset_state(self) -> None:
        """Zeroes every linear-attention state (in place: captured graphs
        keep reading the same buffers)."""
        for mod in self.modules():
            if isinstance(mod, LinearAttention):
                mod.state.zero_()

    def weight_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.parameters())


def make_model(cfg: Config = QWEN35_2B, dtype=torch.bfloat16, device="cuda", seed: int = 1) -> DecodeModel:
    """The stack on `device` with random weights (see init_weights): built on
    the meta device first so no default init runs over 1.9 G parameters."""
    with torch.device("meta"):
        m = DecodeModel(cfg, dtype=dtype)
    m = m.to_empty(device=device)
    m.init_weights(seed)
    return m.eval()
