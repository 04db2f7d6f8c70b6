"""The calls as PyTorch custom ops, torch.ops.atk.*, so that torch.compile
(fullgraph) and CUDA graph capture see one opaque op per call:

    torch.ops.atk.gemv(Tensor x, Tensor W, int table) -> Tensor
    torch.ops.atk.rmsnorm(Tensor x, Tensor w, float eps, int table) -> Tensor
    torch.ops.atk.gemma_rmsnorm(Tensor x, Tensor w, float eps, int table) -> Tensor
    torch.ops.atk.add_rmsnorm(Tensor x, Tensor(a!) residual, Tensor w, float eps, int table) -> Tensor
    torch.ops.atk.add_gemma_rmsnorm(Tensor x, Tensor(a!) residual, Tensor w, float eps, int table) -> Tensor
    torch.ops.atk.gemv_add(Tensor x, Tensor W, Tensor(a!) residual, int table) -> ()
    torch.ops.atk.rmsnorm_gemv(Tensor x, Tensor w, Tensor W, float eps, int table) -> Tensor
    torch.ops.atk.gemma_rmsnorm_gemv(Tensor x, Tensor w, Tensor W, float eps, int table) -> Tensor
    torch.ops.atk.gemv_swiglu(Tensor x, Tensor Wg, Tensor Wu, int table) -> Tensor
    torch.ops.atk.rmsnorm_gemv_swiglu(Tensor x, Tensor w, Tensor Wg, Tensor Wu, float eps, int table) -> Tensor
    torch.ops.atk.gemma_rmsnorm_gemv_swiglu(Tensor x, Tensor w, Tensor Wg, Tensor Wu, float eps, int table) -> Tensor
    torch.ops.atk.add_rmsnorm_gemv(Tensor x, Tensor(a!) residual, Tensor w, Tensor W, float eps, int table) -> Tensor
    torch.ops.atk.add_gemma_rmsnorm_gemv(Tensor x, Tensor(a!) residual, Tensor w, Tensor W, float eps, int table)
        -> Tensor

The fused ops allocate their scratch per call, zeroed (the caching
allocator; inside a captured graph, from the graph's pool).
`table` is Table.handle (the process registry of open tables). The add ops
write residual in place, declared in the schema (a!) so functionalization
keeps the write. Fake (meta) kernels give shapes and dtypes without a
table. Inference only: no autograd formula (run under torch.no_grad() or
torch.inference_mode()). Registered once, on the first import of this
module."""

import torch

from .table import lookup

_SCHEMAS = {
    "gemv": "gemv(Tensor x, Tensor W, int table) -> Tensor",
    "rmsnorm": "rmsnorm(Tensor x, Tensor w, float eps, int table) -> Tensor",
    "gemma_rmsnorm": "gemma_rmsnorm(Tensor x, Tensor w, float eps, int table) -> Tensor",
    "add_rmsnorm": "add_rmsnorm(Tensor x, Tensor(a!) residual, Tensor w, float eps, int table) -> Tensor",
    "add_gemma_rmsnorm": "add_gemma_rmsnorm(Tensor x, Tensor(a!) residual, Tensor w, float eps, int table) -> Tensor",
    "gemv_add": "gemv_add(Tensor x, Tensor W, Tensor(a!) residual, int table) -> ()",
    "rmsnorm_gemv": "rmsnorm_gemv(Tensor x, Tensor w, Tensor W, float eps, int table) -> Tensor",
    "gemma_rmsnorm_gemv": "gemma_rmsnorm_gemv(Tensor x, Tensor w, Tensor W, float eps, int table) -> Tensor",
    "gemv_swiglu": "gemv_swiglu(Tensor x, Tensor Wg, Tensor Wu, int table) -> Tensor",
    "rmsnorm_gemv_swiglu": "rmsnorm_gemv_swiglu(Tensor x, Tensor w, Tensor Wg, Tensor Wu, float eps, int table) -> Tensor",
    "gemma_rmsnorm_gemv_swiglu":
        "gemma_rmsnorm_gemv_swiglu(Tensor x, Tensor w, Tensor Wg, Tensor Wu, float eps, int table) -> Tensor",
    "add_rmsnorm_gemv":
        "add_rmsnorm_gemv(Tensor x, Tensor(a!) residual, Tensor w, Tensor W, float eps, int table) -> Tensor",
    "add_gemma_rmsnorm_gemv":
        "add_gemma_rmsnorm_gemv(Tensor x, Tensor(a!) residual, Tensor w, Tensor W, float eps, int table) -> Tensor",
}

_lib = torch.library.Library("atk", "DEF")
for _s in _SCHEMAS.values():
    _lib.define(_s)


# real kernels: the Table does every check (a CPU tensor gets its clear
# "must be a CUDA tensor" error rather than the dispatcher's)
def _gemv(x, W, table):
    return lookup(table).gemv(x, W)


def _rmsnorm(x, w, eps, table):
    return lookup(table).rmsnorm(x, w, eps)


def _gemma_rmsnorm(x, w, eps, table):
    return lookup(table).gemma_rmsnorm(x, w, eps)


def _add_rmsnorm(x, residual, w, eps, table):
    return lookup(table).add_rmsnorm(x, residual, w, eps)


def _add_gemma_rmsnorm(x, residual, w, eps, table):
    return lookup(table).add_gemma_rmsnorm(x, residual, w, eps)


def _gemv_add(x, W, residual, table):
    lookup(table).gemv_add(x, W, residual)


def _rmsnorm_gemv(x, w, W, eps, table):
    return lookup(table).rmsnorm_gemv(x, w, W, eps)


def _gemma_rmsnorm_gemv(x, w, W, eps, table):
    return lookup(table).gemma_rmsnorm_gemv(x, w, W, eps)


def _gemv_swiglu(x, Wg, Wu, table):
    return lookup(table).gemv_swiglu(x, Wg, Wu)


def _rmsnorm_gemv_swiglu(x, w, Wg, Wu, eps, table):
    return lookup(table).rmsnorm_gemv_swiglu(x, w, Wg, Wu, eps)


def _gemma_rmsnorm_gemv_swiglu(x, w, Wg, Wu, eps, table):
    return lookup(table).gemma_rmsnorm_gemv_swiglu(x, w, Wg, Wu, eps)


def _add_rmsnorm_gemv(x, residual, w, W, eps, table):
    return lookup(table).add_rmsnorm_gemv(x, residual, w, W, eps)


def _add_gemma_rmsnorm_gemv(x, residual, w, W, eps, table):
    return lookup(table).add_gemma_rmsnorm_gemv(x, residual, w, W, eps)


for _name, _fn in (("gemv", _gemv), ("gemv_add", _gemv_add), ("rmsnorm", _rmsnorm), ("gemma_rmsnorm", _gemma_rmsnorm),
                   ("add_rmsnorm", _add_rmsnorm), ("add_gemma_rmsnorm", _add_gemma_rmsnorm),
                   ("rmsnorm_gemv", _rmsnorm_gemv), ("gemma_rmsnorm_gemv", _gemma_rmsnorm_gemv),
                   ("gemv_swiglu", _gemv_swiglu), ("rmsnorm_gemv_swiglu", _rmsnorm_gemv_swiglu),
                   ("gemma_rmsnorm_gemv_swiglu", _gemma_rmsnorm_gemv_swiglu),
                   ("add_rmsnorm_gemv", _add_rmsnorm_gemv), ("add_gemma_rmsnorm_gemv", _add_gemma_rmsnorm_gemv)):
    for _key in ("CUDA", "CPU"):
        _lib.impl(_name, _fn, _key)

_register_fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract


# fake kernels: output shape and dtype only (the table is not consulted)
@_register_fake("atk::gemv")
def _gemv_fake(x, W, table):
    torch._check(x.shape[-1] == W.shape[1], lambda: "atk.gemv: x's K must equal W's K")
    return x.new_empty(x.shape[:-1] + (W.shape[0],))


@_register_fake("atk::rmsnorm")
def _rmsnorm_fake(x, w, eps, table):
    return torch.empty_like(x)


@_register_fake("atk::gemma_rmsnorm")
def _gemma_rmsnorm_fake(x, w, eps, table):
    return torch.empty_like(x)


@_register_fake("atk::add_rmsnorm")
def _add_rmsnorm_fake(x, residual, w, eps, table):
    return torch.empty_like(x)


@_register_fake("atk::add_gemma_rmsnorm")
def _add_gemma_rmsnorm_fake(x, residual, w, eps, table):
    return torch.empty_like(x)


@_register_fake("atk::gemv_add")
def _gemv_add_fake(x, W, residual, table):
    torch._check(x.shape[-1] == W.shape[1], lambda: "atk.gemv_add: x's K must equal W's K")
    return None


def _fused_fake(op, x, W):
    torch._check(x.shape[-1] == W.shape[1], lambda: f"atk.{op}: x's K must equal W's K")
    return x.new_empty(x.shape[:-1] + (W.shape[0],))


@_register_fake("atk::rmsnorm_gemv")
def _rmsnorm_gemv_fake(x, w, W, eps, table):
    return _fused_fake("rmsnorm_gemv", x, W)


@_register_fake("atk::gemma_rmsnorm_gemv")
def _gemma_rmsnorm_gemv_fake(x, w, W, eps, table):
    return _fused_fake("gemma_rmsnorm_gemv", x, W)


@_register_fake("atk::gemv_swiglu")
def _gemv_swiglu_fake(x, Wg, Wu, table):
    return _fused_fake("gemv_swiglu", x, Wg)


@_register_fake("atk::rmsnorm_gemv_swiglu")
def _rmsnorm_gemv_swiglu_fake(x, w, Wg, Wu, eps, table):
    return _fused_fake("rmsnorm_gemv_swiglu", x, Wg)


@_register_fake("atk::gemma_rmsnorm_gemv_swiglu")
def _gemma_rmsnorm_gemv_swiglu_fake(x, w, Wg, Wu, eps, table):
    return _fused_fake("gemma_rmsnorm_gemv_swiglu", x, Wg)


def _add_fused_fake(op, x, residual, W):
    torch._check(residual.shape == x.shape, lambda: f"atk.{op}: residual must have x's shape")
    return _fused_fake(op, x, W)


@_register_fake("atk::add_rmsnorm_gemv")
def _add_rmsnorm_gemv_fake(x, residual, w, W, eps, table):
    return _add_fused_fake("add_rmsnorm_gemv", x, residual, W)


@_register_fake("atk::add_gemma_rmsnorm_gemv")
def _add_gemma_rmsnorm_gemv_fake(x, residual, w, W, eps, table):
    return _add_fused_fake("add_gemma_rmsnorm_gemv", x, residual, W)


gemv = torch.ops.atk.gemv
gemv_add = torch.ops.atk.gemv_add
rmsnorm = torch.ops.atk.rmsnorm
gemma_rmsnorm = torch.ops.atk.gemma_rmsnorm
add_rmsnorm = torch.ops.atk.add_rmsnorm
add_gemma_rmsnorm = torch.ops.atk.add_gemma_rmsnorm
rmsnorm_gemv = torch.ops.atk.rmsnorm_gemv
gemma_rmsnorm_gemv = torch.ops.atk.gemma_rmsnorm_gemv
gemv_swiglu = torch.ops.atk.gemv_swiglu
rmsnorm_gemv_swiglu = torch.ops.atk.rmsnorm_gemv_swiglu
gemma_rmsnorm_gemv_swiglu = torch.ops.atk.gemma_rmsnorm_gemv_swiglu
add_rmsnorm_gemv = torch.ops.atk.add_rmsnorm_gemv
add_gemma_rmsnorm_gemv = torch.ops.atk.add_gemma_rmsnorm_gemv
