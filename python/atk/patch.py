"""atk.patch: routes a model's nn.Linear and RMSNorm-style modules through a
table by replacing each one's forward (an instance attribute), and
Patch.undo() puts the originals back exactly.

A patched forward calls atk only when the table serves that very call (a
tensor on the table's GPU, bf16/fp16 like the weight, contiguous and
16-byte aligned, and t.serves(op, dtype, shape) says a tuned kernel would
run); any other call (CPU, fp32, a fallback shape, prefill M past every
tuned bucket) runs the module's own forward, unchanged. Under torch.compile
the patched forward calls torch.ops.atk.*, in eager the Table directly
(cheaper). A dry table serves only meta tensors (it launches nothing), so a
model run on meta tensors shows, in t.stats(), what a GPU run would get."""

import sys
import types

import torch

from . import ops  # noqa: F401  (registers torch.ops.atk.*)
from .table import lookup

_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
if _compiling is None:  # older PyTorch
    from torch._dynamo import is_compiling as _compiling

_HALF = (torch.bfloat16, torch.float16)

_constant = getattr(getattr(torch, "compiler", None), "assume_constant_result", None)
if _constant is None:
    from torch._dynamo import assume_constant_result as _constant


@_constant
def _serves(handle, op, dtype, M, K, N):
    """Table.serves by handle; under torch.compile evaluated once while
    tracing (the table never changes) instead of traced into ctypes."""
    return lookup(handle).serves(op, dtype, M, K, N)


def _eps_of(mod):
    for a in ("eps", "variance_epsilon"):
        if hasattr(mod, a):
            return getattr(mod, a)
    return None


def _norm_kind(name, mod, norms):
    """"rmsnorm", "gemma" or None for module `mod` named `name` in the model."""
    for key, kind in (norms or {}).items():
        if isinstance(key, type):
            hit = isinstance(mod, key)
        elif isinstance(key, str):
            hit = type(mod).__name__ == key
        else:
            hit = bool(key(name))
        if hit:
            if kind not in ("rmsnorm", "gemma", None):
                raise ValueError(f"atk.patch: norms[{key!r}] must be 'rmsnorm', 'gemma' or None (got {kind!r})")
            return kind
    cls = type(mod).__name__
    if not cls.endswith("RMSNorm"):
        return None
    tag = getattr(mod, "atk_norm", None)
    if tag in ("rmsnorm", "gemma"):
        return tag
    return "gemma" if "Gemma" in cls else "rmsnorm"


class Patch:
    """What atk.patch replaced. undo() (or leaving `with atk.patch(...)`)
    restores every original forward; summary() lists the modules."""

    def __init__(self, table):
        self.table = table
        self._entries = []  # (name, module, kind, the instance forward before, or None)

    @property
    def patched(self):
        """[(module name, "gemv" | "rmsnorm" | "gemma_rmsnorm")]"""
        return [(n, k) for n, _, k, _ in self._entries]

    def summary(self):
        lines = [f"atk.patch: {len(self._entries)} modules through table {self.table.path!r}"]
        for n, m, k, _ in self._entries:
            lines.append(f"  {n or '(root)'}: {type(m).__name__} -> {k}")
        return "\n".join(lines)

    def undo(self):
        """Restores the forwards; a second undo is a no-op."""
        for _, mod, _, before in reversed(self._entries):
            if before is None:
                mod.__dict__.pop("forward", None)
            else:
                mod.forward = before
        self._entries = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.undo()

    def _add(self, name, mod, kind, forward):
        forward._atk_patch = self
        self._entries.append((name, mod, kind, mod.__dict__.get("forward")))
        mod.forward = forward


def _on_table(t, x):
    """x lies where the table can run on it: its GPU, or meta for a dry table."""
    if t.dry:
        return x.device.type == "meta"
    return x.is_cuda and x.get_device() == t.device


def _plain(x, compiling):
    """Contiguous and (outside compile, where pointers are known) aligned."""
    return x.is_contiguous() and (compiling or x.data_ptr() & 15 == 0)


def _linear_forward(mod, t, orig):
    h = t.handle

    def forward(x, *args, **kwargs):
        W = mod.weight
        if not args and not kwargs and x.dtype in _HALF and x.dtype == W.dtype and x.dim() >= 1 and \
                _on_table(t, x) and x.shape[-1] == W.shape[1] and W.dim() == 2:
            K = W.shape[1]
            c = _compiling()
            if _plain(x, c) and _plain(W, c) and _serves(h, "gemv", x.dtype, x.numel() // K, K, W.shape[0]):
                y = torch.ops.atk.gemv(x, W, h) if c else t.gemv(x, W)
                b = mod.bias
                return y if b is None else y + b
        return orig(x, *args, **kwargs)

    return forward


def _norm_forward(mod, t, orig, kind):
    """forward(x) -> y, and the residual form of vLLM's RMSNorm:
    forward(x, residual) -> (y, residual), residual updated in place to
    x + residual (rounded) and y the norm of that sum: the add ops."""
    h = t.handle
    gemma = kind == "gemma"
    op = "gemma_rmsnorm" if gemma else "rmsnorm"
    add_op = "add_" + op
    call = t.gemma_rmsnorm if gemma else t.rmsnorm
    add_call = t.add_gemma_rmsnorm if gemma else t.add_rmsnorm
    custom = torch.ops.atk.gemma_rmsnorm if gemma else torch.ops.atk.rmsnorm
    add_custom = torch.ops.atk.add_gemma_rmsnorm if gemma else torch.ops.atk.add_rmsnorm

    def forward(x, *args, **kwargs):
        w = mod.weight
        # len() rather than `not args`: dynamo does not trace operator.not_ on a tuple
        nargs, nkw = len(args), len(kwargs)
        residual = None
        if nargs == 1 and nkw == 0:
            residual = args[0]
        elif nargs == 0 and nkw == 1 and "residual" in kwargs:
            residual = kwargs["residual"]
        plain_call = nargs == 0 and nkw == 0
        if (plain_call or isinstance(residual, torch.Tensor)) and w is not None and x.dtype in _HALF and \
                x.dtype == w.dtype and x.dim() >= 1 and w.dim() == 1 and x.shape[-1] == w.shape[0] and \
                _on_table(t, x):
            H = w.shape[0]
            c = _compiling()
            eps = _eps_of(mod)
            eps = float(torch.finfo(x.dtype).eps if eps is None else eps)
            if plain_call:
                if _plain(x, c) and _plain(w, c) and _serves(h, op, x.dtype, x.numel() // H, H, 0):
                    return custom(x, w, eps, h) if c else call(x, w, eps)
            elif residual.dtype == x.dtype and residual.shape == x.shape and residual.device == x.device and \
                    _plain(x, c) and _plain(w, c) and _plain(residual, c) and \
                    _serves(h, add_op, x.dtype, x.numel() // H, H, 0):
                y = add_custom(x, residual, w, eps, h) if c else add_call(x, residual, w, eps)
                return y, residual
        return orig(x, *args, **kwargs)

    return forward


def patch(model, table, norms=None):
    """Patches every nn.Linear and RMSNorm-style module of `model` (itself
    included) to run through `table` where it serves the call. `norms` maps
    a module class, a class name (str) or a predicate on the module's
    qualified name to "rmsnorm", "gemma" (weight factor 1 + w) or None (leave
    alone); without an entry, a class whose name ends in "RMSNorm" with a
    1-D weight and an eps/variance_epsilon attribute is taken, Gemma-style
    when its name contains "Gemma" or it has atk_norm = "gemma". A norm
    called as forward(x, residual) (vLLM's contract: residual += x in
    place, returns (y, residual)) runs the add op. Modules already patched
    are left as they are. Returns a Patch."""
    table._c()  # a closed table fails here, not at the first forward
    p = Patch(table)
    for name, mod in model.named_modules():
        cur = mod.__dict__.get("forward")
        if cur is not None and getattr(cur, "_atk_patch", None) is not None:
            continue
        if isinstance(mod, torch.nn.Linear):
            p._add(name, mod, "gemv", _linear_forward(mod, table, mod.forward))
            continue
        kind = _norm_kind(name, mod, norms)
        if kind is None:
            continue
        w = getattr(mod, "weight", None)
        if not isinstance(w, torch.Tensor) or w.dim() != 1 or not (hasattr(mod, "eps") or
                                                                   hasattr(mod, "variance_epsilon")):
            continue
        p._add(name, mod, "gemma_rmsnorm" if kind == "gemma" else "rmsnorm",
               _norm_forward(mod, table, mod.forward, kind))
    return p


class _CallableModule(types.ModuleType):
    """`import atk.patch` makes the attribute atk.patch this module (the
    import system sets it), shadowing the function of the same name: the
    module then calls it, so atk.patch(model, table) works either way."""

    def __call__(self, model, table, norms=None):
        return patch(model, table, norms)


sys.modules[__name__].__class__ = _CallableModule
