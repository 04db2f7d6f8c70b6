"""Table: an opened tuned table (one atk_ctx) and its calls (GEMV, the norms,
the fused decode ops) on PyTorch tensors. Every argument is checked before
anything launches (type, dtype, shape, contiguous rows, 16-byte alignment,
device) and bad input raises TypeError/ValueError naming it; a failing
library call raises AtkError with atk_errmsg's text. Nothing is copied: a
misaligned or strided tensor is an error, not a silent copy.

Tables live in a process registry under an integer handle (t.handle), the
`table` argument of the torch.ops.atk.* custom ops, until close()."""

import ctypes
import itertools
import threading
from dataclasses import dataclass

from . import _lib
from .errors import AtkError

torch = None  # imported on first need: opening, explaining, reporting need no PyTorch
_DTYPE_CODE = {}  # torch dtype -> enum atk_dtype
_raw_stream = None  # device index -> the current stream's cudaStream_t as an int

_registry = {}
_registry_lock = threading.Lock()
_ids = itertools.count(1)

_DTYPE_NAMES = {"bf16": _lib.BF16, "bfloat16": _lib.BF16, "fp16": _lib.FP16, "float16": _lib.FP16, "half": _lib.FP16}


def _need_torch():
    """Imports PyTorch once; returns False when it is not installed."""
    global torch, _raw_stream
    if torch is not None:
        return True
    try:
        import torch as t
    except ImportError:
        return False
    _DTYPE_CODE[t.bfloat16] = _lib.BF16
    _DTYPE_CODE[t.float16] = _lib.FP16
    raw = getattr(t._C, "_cuda_getCurrentRawStream", None)
    if raw is None:  # a PyTorch without the private fast path
        def raw(index):
            return t.cuda.current_stream(index).cuda_stream
    _raw_stream = raw
    torch = t
    return True


def lookup(handle):
    """The open Table registered under `handle` (Table.handle); AtkError
    when it was closed or never existed."""
    t = _registry.get(handle)
    if t is None:
        raise AtkError(_lib.ERR_USAGE, f"atk: no open table with handle {handle} (closed?)")
    return t


@dataclass(frozen=True)
class Choice:
    """How a call is (or would be) served: atk_explain's struct atk_choice.
    path is "tuned", "bucket", "inferred" or "fallback"; from_shape the tuned
    shape the kernel comes from ("" for fallback); bucket the tuned M that
    serves a bucket/inferred call (else 0); reason the library's words."""
    path: str
    strategy: str
    kernel: str
    params: str
    from_shape: str
    bucket: int
    reason: str
    key: str
    grid: tuple
    block: tuple
    smem: int
    pdl: bool
    recompiled: bool


def _overlap(a, b):
    """True when contiguous tensors a and b on one device share bytes: their
    address ranges meet (meta tensors, which have no addresses: one storage
    and meeting element ranges). Tensors on two devices are the device
    check's business, not this one's."""
    if a.device != b.device:
        return False
    if a.device.type == "meta":
        if a.untyped_storage()._cdata != b.untyped_storage()._cdata:
            return False
        sa, sb = a.storage_offset() * a.element_size(), b.storage_offset() * b.element_size()
    else:
        sa, sb = a.data_ptr(), b.data_ptr()
    return sa < sb + b.numel() * b.element_size() and sb < sa + a.numel() * a.element_size()


def _op_code(op):
    if isinstance(op, int) and 0 <= op < _lib.NOPS:
        return op
    try:
        return _lib.OP_NAMES.index(op)
    except ValueError:
        raise ValueError(f"atk: op must be one of {', '.join(_lib.OP_NAMES)} (got {op!r})") from None


def _dtype_code(dtype):
    if isinstance(dtype, str):
        code = _DTYPE_NAMES.get(dtype.lower())
    elif isinstance(dtype, int) and dtype in (_lib.BF16, _lib.FP16):
        code = dtype
    else:
        _need_torch()
        code = _DTYPE_CODE.get(dtype)
    if code is None:
        raise TypeError(f"atk: dtype must be bf16 or fp16 (torch.bfloat16 / torch.float16), got {dtype!r}")
    return code


class Table:
    """An opened table for one GPU (atk.open) or for a described GPU without
    one (atk.open_dry: calls check, choose and count, launch nothing).
    A context manager; close() frees it; any call after close raises
    AtkError."""

    def __init__(self, ctx, device, dry, path):
        self._ctx = ctx  # atk_ctx* as an int; None once closed
        self.device = device  # CUDA ordinal; None for a dry table
        self.dry = dry
        self.path = path
        lib = _lib.load()
        self._lib = lib
        # the launch path: bound once, so a call does no attribute lookups
        self._f_gemv = lib.atk_gemv
        self._f_gemv_add = lib.atk_gemv_add
        self._f_norm = (None, lib.atk_rmsnorm, lib.atk_add_rmsnorm, lib.atk_gemma_rmsnorm, lib.atk_add_gemma_rmsnorm)
        self._f_fused = {_lib.OP_RMSNORM_GEMV: lib.atk_rmsnorm_gemv,
                         _lib.OP_GEMMA_RMSNORM_GEMV: lib.atk_gemma_rmsnorm_gemv,
                         _lib.OP_GEMV_SWIGLU: lib.atk_gemv_swiglu,
                         _lib.OP_RMSNORM_GEMV_SWIGLU: lib.atk_rmsnorm_gemv_swiglu,
                         _lib.OP_GEMMA_RMSNORM_GEMV_SWIGLU: lib.atk_gemma_rmsnorm_gemv_swiglu,
                         _lib.OP_ADD_RMSNORM_GEMV: lib.atk_add_rmsnorm_gemv,
                         _lib.OP_ADD_GEMMA_RMSNORM_GEMV: lib.atk_add_gemma_rmsnorm_gemv}
        self._serves = {}  # (op, dtype, M, K, N) -> bool; the context is immutable
        with _registry_lock:
            self.handle = next(_ids)
            _registry[self.handle] = self

    # ------------------------------------------------------------ lifetime
    def close(self):
        """Frees the context (atk_close). No launched call may be in flight,
        and no captured CUDA graph that uses the table may be replayed
        afterwards. A second close is a no-op."""
        ctx, self._ctx = self._ctx, None
        with _registry_lock:
            _registry.pop(self.handle, None)
        if ctx:
            self._lib.atk_close(ctx)

    @property
    def closed(self):
        return self._ctx is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._ctx is None else ("dry" if self.dry else f"cuda:{self.device}")
        return f"<atk.Table {self.path!r} {state} handle={self.handle}>"

    def _c(self):
        ctx = self._ctx
        if ctx is None:
            raise AtkError(_lib.ERR_USAGE, f"atk: the table {self.path!r} is closed")
        return ctx

    def _fail(self, status):
        msg = _lib.text(self._lib.atk_errmsg(self._ctx)) or _lib.text(self._lib.atk_errstr(status))
        return AtkError(status, f"atk: {msg} (status {status}: {_lib.text(self._lib.atk_errstr(status))})")

    # ------------------------------------------------------------- questions
    def explain(self, op, dtype, M, K, N=0):
        """What a call of `op` ("gemv", "rmsnorm", ...) on this shape gets,
        without launching or counting (atk_explain). Norms: M = T rows,
        K = H, N ignored. dtype: "bf16"/"fp16" or a torch dtype."""
        ctx = self._c()
        ch = _lib.ChoiceC()
        rc = self._lib.atk_explain(ctx, _op_code(op), _dtype_code(dtype), int(M), int(K), int(N), ctypes.byref(ch))
        if rc:
            raise self._fail(rc)
        t = _lib.text
        return Choice(path=_lib.PATH_NAMES.get(ch.path, str(ch.path)), strategy=t(ch.strategy), kernel=t(ch.kernel),
                      params=t(ch.params), from_shape=t(ch.from_), bucket=ch.bucket, reason=t(ch.reason),
                      key=t(ch.key), grid=tuple(ch.grid), block=tuple(ch.block), smem=ch.smem, pdl=bool(ch.pdl),
                      recompiled=bool(ch.recompiled))

    def serves(self, op, dtype, M, K, N=0):
        """True when a call of this op/dtype/shape would run a tuned kernel
        (path tuned, bucket or inferred), False for fallback or a shape the
        library refuses (e.g. M = 0). Cached: the table never changes."""
        self._c()
        key = (op, dtype, M, K, N)
        r = self._serves.get(key)
        if r is None:
            try:
                r = self.explain(op, dtype, M, K, N).path != "fallback"
            except AtkError:
                r = False
            self._serves[key] = r
        return r

    def stats(self):
        """{op name: {calls, tuned, bucket, inferred, fallback, missed,
        rejected}} since open or reset_stats()."""
        ctx = self._c()
        out = {}
        s = _lib.OpStats()
        for op, name in enumerate(_lib.OP_NAMES):
            rc = self._lib.atk_stats(ctx, op, ctypes.byref(s))
            if rc:
                raise self._fail(rc)
            out[name] = {f: getattr(s, f) for f, _ in _lib.OpStats._fields_}
        return out

    def reset_stats(self):
        """Zeroes every counter (atk_stats_reset)."""
        self._lib.atk_stats_reset(self._c())

    def info(self):
        """What open found (atk_get_info) as a dict: device, cc, sms,
        driver_version, dry, rows, for_this_gpu, loaded, recompiled, failed,
        all_fallback."""
        ctx = self._c()
        i = _lib.Info()
        rc = self._lib.atk_get_info(ctx, ctypes.byref(i))
        if rc:
            raise self._fail(rc)
        d = {f: getattr(i, f) for f, _ in _lib.Info._fields_}
        d["device"] = i.device.decode("utf-8", "replace")
        d["dry"] = bool(d["dry"])
        d["all_fallback"] = bool(d["all_fallback"])
        return d

    def report(self):
        """atk_report: where the table came from, what loaded, what falls
        back and why."""
        return _lib.text(self._lib.atk_report(self._c()))

    # ------------------------------------------------------------ arguments
    def _tensor(self, op, name, t, ndim=None):
        """Checks one tensor argument, device last (so the other checks can
        be exercised with CPU tensors); returns its atk dtype code."""
        if torch is None or not isinstance(t, torch.Tensor):
            raise TypeError(f"atk.{op}: {name} must be a torch.Tensor (got {type(t).__name__})")
        code = _DTYPE_CODE.get(t.dtype)
        if code is None:
            raise TypeError(f"atk.{op}: {name} must be bfloat16 or float16 (got {t.dtype})")
        if ndim is not None and t.dim() != ndim:
            raise ValueError(f"atk.{op}: {name} must have {ndim} dimension(s) (got shape {tuple(t.shape)})")
        if t.dim() == 0:
            raise ValueError(f"atk.{op}: {name} must have at least one dimension")
        if not t.is_contiguous():
            raise ValueError(f"atk.{op}: {name} must be contiguous (got strides {t.stride()} for shape "
                             f"{tuple(t.shape)}); call .contiguous() first")
        if t.data_ptr() & 15:
            raise ValueError(f"atk.{op}: {name}'s data must be 16-byte aligned (data_ptr() % 16 = "
                             f"{t.data_ptr() % 16}, a view at an element offset?); pass .clone()")
        return code

    def _device(self, op, names, tensors):
        """All tensors on the table's GPU (a dry table: any one CUDA or meta
        device, nothing is read); returns the stream to launch on."""
        dev = tensors[0].device
        for n, t in zip(names, tensors):
            if t.device != dev:
                raise ValueError(f"atk.{op}: {n} is on {t.device}, {names[0]} on {dev}: all tensors must be on "
                                 "one device")
        if self.dry:
            if dev.type not in ("cuda", "meta"):
                raise ValueError(f"atk.{op}: {names[0]} must be a CUDA tensor (got {dev}; a dry table also "
                                 "takes meta tensors)")
            return None
        if dev.type != "cuda":
            raise ValueError(f"atk.{op}: {names[0]} must be a CUDA tensor (got {dev})")
        if dev.index != self.device:
            raise ValueError(f"atk.{op}: the tensors are on {dev}, the table on cuda:{self.device}")
        return _raw_stream(self.device)

    def _out(self, op, out, shape, like):
        if out is None:
            return torch.empty(shape, dtype=like.dtype, device=like.device)
        self._tensor(op, "out", out)
        if out.dtype != like.dtype:
            raise TypeError(f"atk.{op}: out must be {like.dtype} like the inputs (got {out.dtype})")
        if tuple(out.shape) != tuple(shape):
            raise ValueError(f"atk.{op}: out must have shape {tuple(shape)} (got {tuple(out.shape)})")
        return out

    # ----------------------------------------------------------------- calls
    # Each call has a fast path for the common case (a real table, plain
    # tensors on its GPU, everything consistent): a few attribute reads and
    # one ctypes call. Anything else, including every error and dry tables,
    # goes to the checked path, which names the bad argument or launches.

    def gemv(self, x, W, out=None):
        """y = x . W^T (fp32 accumulation): x [..., K] (rows M = x.numel()//K),
        W [N, K] (nn.Linear layout), bf16/fp16 on the table's GPU; returns
        y [..., N] (into `out` when given). Launches on the current stream."""
        dev = self.device
        try:
            dt = _DTYPE_CODE[x.dtype]
            N, K = W.shape
            if x.dim() == 2:
                M = x.shape[0]
                shape = (M, N)
            else:
                M = x.numel() // K
                shape = x.shape[:-1] + (N,)
            xp = x.data_ptr()
            wp = W.data_ptr()
            ok = (dev is not None and W.dtype is x.dtype and x.shape[-1] == K and M > 0 and N > 0 and
                  not (xp | wp) & 15 and x.get_device() == dev and W.get_device() == dev and
                  x.is_contiguous() and W.is_contiguous())
            if ok and out is not None:
                ok = (out.dtype is x.dtype and out.shape == shape and not out.data_ptr() & 15 and
                      out.get_device() == dev and out.is_contiguous())
        except Exception:  # not tensors, wrong rank ...: the checked path says what
            ok = False
        ctx = self._ctx
        if not ok or ctx is None:
            return self._gemv_checked(x, W, out)
        y = x.new_empty(shape) if out is None else out
        rc = self._f_gemv(ctx, _raw_stream(dev), dt, M, K, N, xp, wp, y.data_ptr())
        if rc:
            raise self._fail(rc)
        return y

    def _gemv_problem(self, op, x, W):
        """Checks x [..., K] and W [N, K] of one dtype; returns (dtype code,
        M, K, N, the output shape [..., N])."""
        dt = self._tensor(op, "x", x)
        if self._tensor(op, "W", W, 2) != dt:
            raise TypeError(f"atk.{op}: W is {W.dtype}, x is {x.dtype}: they must match")
        N, K = W.shape
        if x.shape[-1] != K:
            raise ValueError(f"atk.{op}: x has K={x.shape[-1]} columns, W [N={N}, K={K}] needs K={K}")
        M = x.numel() // K if K else 0
        if M == 0 or N == 0:
            raise ValueError(f"atk.{op}: empty problem (M={M}, K={K}, N={N})")
        return dt, M, K, N, x.shape[:-1] + (N,)

    def _gemv_checked(self, x, W, out):
        ctx = self._c()
        dt, M, K, N, shape = self._gemv_problem("gemv", x, W)
        y = self._out("gemv", out, shape, x)
        stream = self._device("gemv", ("x", "W", "out"), (x, W, y))
        rc = self._f_gemv(ctx, stream, dt, M, K, N, x.data_ptr(), W.data_ptr(), y.data_ptr())
        if rc:
            raise self._fail(rc)
        return y

    def gemv_add(self, x, W, residual):
        """residual += x . W^T in place, rounded as the unfused GEMV then add:
        rne(residual + rne(x . W^T)). x [..., K], W [N, K], residual [..., N]
        (the o_proj / down_proj of a layer adding into the residual stream).
        Returns residual."""
        ctx = self._c()
        dt, M, K, N, shape = self._gemv_problem("gemv_add", x, W)
        if self._tensor("gemv_add", "residual", residual) != dt:
            raise TypeError(f"atk.gemv_add: residual is {residual.dtype}, x is {x.dtype}: they must match")
        shape = tuple(shape)
        if tuple(residual.shape) != shape:
            raise ValueError(f"atk.gemv_add: residual must have shape {shape} (got {tuple(residual.shape)})")
        stream = self._device("gemv_add", ("x", "W", "residual"), (x, W, residual))
        rc = self._f_gemv_add(ctx, stream, dt, M, K, N, x.data_ptr(), W.data_ptr(), residual.data_ptr())
        if rc:
            raise self._fail(rc)
        return residual

    def _norm(self, op, opname, x, residual, w, eps, out):
        dev = self.device
        try:
            dt = _DTYPE_CODE[x.dtype]
            (H,) = w.shape
            T = x.shape[0] if x.dim() == 2 else x.numel() // H
            xp = x.data_ptr()
            wp = w.data_ptr()
            rp = 0 if residual is None else residual.data_ptr()
            ok = (dev is not None and w.dtype is x.dtype and x.shape[-1] == H and T > 0 and
                  not (xp | wp | rp) & 15 and x.get_device() == dev and w.get_device() == dev and
                  x.is_contiguous() and w.is_contiguous())
            if ok and residual is not None:
                ok = (residual.dtype is x.dtype and residual.shape == x.shape and residual.get_device() == dev and
                      residual.is_contiguous())
            if ok and out is not None:
                ok = (out.dtype is x.dtype and out.shape == x.shape and not out.data_ptr() & 15 and
                      out.get_device() == dev and out.is_contiguous())
        except Exception:
            ok = False
        ctx = self._ctx
        if not ok or ctx is None:
            return self._norm_checked(op, opname, x, residual, w, eps, out)
        y = torch.empty_like(x) if out is None else out
        if residual is None:
            rc = self._f_norm[op](ctx, _raw_stream(dev), dt, T, H, xp, wp, y.data_ptr(), eps)
        else:
            rc = self._f_norm[op](ctx, _raw_stream(dev), dt, T, H, xp, rp, wp, y.data_ptr(), eps)
        if rc:
            raise self._fail(rc)
        return y

    def _norm_checked(self, op, opname, x, residual, w, eps, out):
        ctx = self._c()
        dt = self._tensor(opname, "x", x)
        if self._tensor(opname, "w", w, 1) != dt:
            raise TypeError(f"atk.{opname}: w is {w.dtype}, x is {x.dtype}: they must match")
        H = w.shape[0]
        if x.shape[-1] != H:
            raise ValueError(f"atk.{opname}: x has H={x.shape[-1]} columns, w has {H}")
        T = x.numel() // H if H else 0
        if T == 0:
            raise ValueError(f"atk.{opname}: empty problem (T={T}, H={H})")
        if residual is not None:
            if self._tensor(opname, "residual", residual) != dt:
                raise TypeError(f"atk.{opname}: residual is {residual.dtype}, x is {x.dtype}: they must match")
            if residual.shape != x.shape:
                raise ValueError(f"atk.{opname}: residual has shape {tuple(residual.shape)}, x "
                                 f"{tuple(x.shape)}: they must match")
        y = self._out(opname, out, x.shape, x)
        fn = self._f_norm[op]
        if residual is None:
            stream = self._device(opname, ("x", "w", "out"), (x, w, y))
            rc = fn(ctx, stream, dt, T, H, x.data_ptr(), w.data_ptr(), y.data_ptr(), eps)
        else:
            stream = self._device(opname, ("x", "residual", "w", "out"), (x, residual, w, y))
            rc = fn(ctx, stream, dt, T, H, x.data_ptr(), residual.data_ptr(), w.data_ptr(), y.data_ptr(), eps)
        if rc:
            raise self._fail(rc)
        return y

    def rmsnorm(self, x, w, eps=1e-6, out=None):
        """y = x * rsqrt(mean(x^2) + eps) * w over the last dimension H:
        x [..., H], w [H] of x's dtype. Returns y like x."""
        return self._norm(_lib.OP_RMSNORM, "rmsnorm", x, None, w, eps, out)

    def gemma_rmsnorm(self, x, w, eps=1e-6, out=None):
        """rmsnorm with the weight factor (1 + w) (Gemma-style)."""
        return self._norm(_lib.OP_GEMMA_RMSNORM, "gemma_rmsnorm", x, None, w, eps, out)

    def add_rmsnorm(self, x, residual, w, eps=1e-6, out=None):
        """residual = x + residual (rounded, written back in place), then
        y = rmsnorm(residual, w, eps). Returns y."""
        return self._norm(_lib.OP_ADD_RMSNORM, "add_rmsnorm", x, residual, w, eps, out)

    def add_gemma_rmsnorm(self, x, residual, w, eps=1e-6, out=None):
        """add_rmsnorm with the weight factor (1 + w)."""
        return self._norm(_lib.OP_ADD_GEMMA_RMSNORM, "add_gemma_rmsnorm", x, residual, w, eps, out)

    # ----------------------------------------------------- fused decode ops
    def scratch_bytes(self, op, dtype, M, K, N):
        """Bytes of scratch a fused call of `op` needs: 256 bytes of counters
        (_lib.FUSED_COUNTER_BYTES, used by the add forms), then its unfused
        fallback's normalized x, then g and u; 0 for an op that is not
        fused. A scratch passed to a call must have its counters zeroed once,
        when it is allocated (torch.zeros): every call leaves them zero."""
        return self._lib.atk_fused_scratch_bytes(_op_code(op), _dtype_code(dtype), int(M), int(K), int(N))

    def _fused(self, op, w, x, Wg, Wu, eps, out, scratch, residual=None):
        """The seven fused calls: checks every argument (naming it), allocates
        y and a zeroed scratch with torch when not given, launches one call.
        residual (the add forms) is read and written in place."""
        ctx = self._c()
        name = _lib.OP_NAMES[op]
        norm, swiglu = w is not None, Wu is not None
        add = op in (_lib.OP_ADD_RMSNORM_GEMV, _lib.OP_ADD_GEMMA_RMSNORM_GEMV)
        dt = self._tensor(name, "x", x)
        wn = "Wg" if swiglu else "W"
        if self._tensor(name, wn, Wg, 2) != dt:
            raise TypeError(f"atk.{name}: {wn} is {Wg.dtype}, x is {x.dtype}: they must match")
        N, K = Wg.shape
        if x.shape[-1] != K:
            raise ValueError(f"atk.{name}: x has K={x.shape[-1]} columns, {wn} [N={N}, K={K}] needs K={K}")
        if swiglu:
            if self._tensor(name, "Wu", Wu, 2) != dt:
                raise TypeError(f"atk.{name}: Wu is {Wu.dtype}, x is {x.dtype}: they must match")
            if tuple(Wu.shape) != (N, K):
                raise ValueError(f"atk.{name}: Wu must have Wg's shape {(N, K)} (got {tuple(Wu.shape)})")
        if norm:
            if self._tensor(name, "w", w, 1) != dt:
                raise TypeError(f"atk.{name}: w is {w.dtype}, x is {x.dtype}: they must match")
            if w.shape[0] != K:
                raise ValueError(f"atk.{name}: w has {w.shape[0]} elements, x has K={K} columns")
        if add:
            if self._tensor(name, "residual", residual) != dt:
                raise TypeError(f"atk.{name}: residual is {residual.dtype}, x is {x.dtype}: they must match")
            if residual.shape != x.shape:
                raise ValueError(f"atk.{name}: residual has shape {tuple(residual.shape)}, x "
                                 f"{tuple(x.shape)}: they must match")
        M = x.numel() // K if K else 0
        if M == 0 or N == 0:
            raise ValueError(f"atk.{name}: empty problem (M={M}, K={K}, N={N})")
        y = self._out(name, out, x.shape[:-1] + (N,), x)
        if add:
            # written while x, w, W are read and y written: atk requires them apart
            for n, t in (("x", x), ("w", w), (wn, Wg), ("out", y)):
                if _overlap(residual, t):
                    raise ValueError(f"atk.{name}: residual shares memory with {n} (the same tensor or a view "
                                     f"of it): residual is written in place; pass a separate tensor")
        need = self._lib.atk_fused_scratch_bytes(op, dt, M, K, N)
        if scratch is None:
            # zeroed: the add forms' counters must start at zero (cheap; a
            # caller's scratch is zeroed once by the caller)
            scratch = torch.zeros(need, dtype=torch.uint8, device=x.device)
        else:
            if torch is None or not isinstance(scratch, torch.Tensor):
                raise TypeError(f"atk.{name}: scratch must be a torch.Tensor (got {type(scratch).__name__})")
            if not scratch.is_contiguous():
                raise ValueError(f"atk.{name}: scratch must be contiguous")
            if scratch.data_ptr() & 15:
                raise ValueError(f"atk.{name}: scratch's data must be 16-byte aligned (data_ptr() % 16 = "
                                 f"{scratch.data_ptr() % 16})")
            have = scratch.numel() * scratch.element_size()
            if have < need:
                raise ValueError(f"atk.{name}: scratch has {have} bytes, the call needs {need} "
                                 f"(Table.scratch_bytes({name!r}, ...))")
        names = ["x", wn] + (["Wu"] if swiglu else []) + (["w"] if norm else []) + (["residual"] if add else []) + \
            ["out", "scratch"]
        tensors = [x, Wg] + ([Wu] if swiglu else []) + ([w] if norm else []) + ([residual] if add else []) + \
            [y, scratch]
        stream = self._device(name, names, tensors)
        fn = self._f_fused[op]
        # meta tensors have no data (a view's data_ptr is its offset alone):
        # a dry table gets every pointer NULL, atk's planning call
        ptr = (lambda t: 0) if x.device.type == "meta" else (lambda t: t.data_ptr())
        xp, gp, yp, sp = ptr(x), ptr(Wg), ptr(y), ptr(scratch)
        if add:
            rc = fn(ctx, stream, dt, M, K, N, xp, ptr(residual), ptr(w), gp, yp, eps, sp)
        elif norm and swiglu:
            rc = fn(ctx, stream, dt, M, K, N, xp, ptr(w), gp, ptr(Wu), yp, eps, sp)
        elif norm:
            rc = fn(ctx, stream, dt, M, K, N, xp, ptr(w), gp, yp, eps, sp)
        else:
            rc = fn(ctx, stream, dt, M, K, N, xp, gp, ptr(Wu), yp, sp)
        if rc:
            raise self._fail(rc)
        return y

    def rmsnorm_gemv(self, x, w, W, eps=1e-6, out=None, scratch=None):
        """y = rmsnorm(x, w, eps) . W^T in one kernel where one is tuned:
        x [..., K], w [K], W [N, K]; returns y [..., N]. Rounded as the
        unfused rmsnorm then gemv. scratch (bytes, scratch_bytes(...)) is
        allocated (zeroed) per call when not given: pass one to reuse it
        (graphs), zeroed once when allocated (torch.zeros)."""
        return self._fused(_lib.OP_RMSNORM_GEMV, w, x, W, None, eps, out, scratch)

    def gemma_rmsnorm_gemv(self, x, w, W, eps=1e-6, out=None, scratch=None):
        """rmsnorm_gemv with the Gemma weight factor (1 + w)."""
        return self._fused(_lib.OP_GEMMA_RMSNORM_GEMV, w, x, W, None, eps, out, scratch)

    def gemv_swiglu(self, x, Wg, Wu, out=None, scratch=None):
        """y = silu(x . Wg^T) * (x . Wu^T), g and u rounded to x's dtype
        first: x [..., K], Wg and Wu [N, K] (N the intermediate size);
        returns y [..., N]. A concatenated gate_up weight W [2N, K] is
        passed as W[:N], W[N:] (atk sees Wu == Wg + N*K: one GEMV over 2N
        rows in its unfused path)."""
        return self._fused(_lib.OP_GEMV_SWIGLU, None, x, Wg, Wu, 0.0, out, scratch)

    def rmsnorm_gemv_swiglu(self, x, w, Wg, Wu, eps=1e-6, out=None, scratch=None):
        """gemv_swiglu of rmsnorm(x, w, eps)."""
        return self._fused(_lib.OP_RMSNORM_GEMV_SWIGLU, w, x, Wg, Wu, eps, out, scratch)

    def gemma_rmsnorm_gemv_swiglu(self, x, w, Wg, Wu, eps=1e-6, out=None, scratch=None):
        """gemv_swiglu of gemma_rmsnorm(x, w, eps)."""
        return self._fused(_lib.OP_GEMMA_RMSNORM_GEMV_SWIGLU, w, x, Wg, Wu, eps, out, scratch)

    def add_rmsnorm_gemv(self, x, residual, w, W, eps=1e-6, out=None, scratch=None):
        """The residual-add form of rmsnorm_gemv: z = x + residual (rounded,
        written back into residual in place, as add_rmsnorm writes it), then
        y = rmsnorm(z, w, eps) . W^T. x and residual [..., K] (one shape and
        dtype, residual not x nor a view of it), w [K], W [N, K]; returns
        y [..., N]. A passed scratch (scratch_bytes(...) bytes) must be
        zeroed once when allocated (torch.zeros): its first 256 bytes are
        counters the fused kernel needs zero and every call leaves zero; it
        may serve several fused calls one after another. M > 64 runs the
        unfused sequence, add_rmsnorm then gemv."""
        return self._fused(_lib.OP_ADD_RMSNORM_GEMV, w, x, W, None, eps, out, scratch, residual)

    def add_gemma_rmsnorm_gemv(self, x, residual, w, W, eps=1e-6, out=None, scratch=None):
        """add_rmsnorm_gemv with the Gemma weight factor (1 + w)."""
        return self._fused(_lib.OP_ADD_GEMMA_RMSNORM_GEMV, w, x, W, None, eps, out, scratch, residual)


def open(path, device=None, flags=0):
    """Opens the tuned table at `path` (an autotune SQLite cache or a JSON
    export) for CUDA device `device` (default: torch's current device).
    A missing or foreign table opens with every call on fallback unless
    flags has STRICT_OPEN; report() says why. Raises AtkError."""
    lib = _lib.load()
    if device is None:
        if not _need_torch():
            raise TypeError("atk.open: device=None needs PyTorch (torch.cuda.current_device()); pass an ordinal")
        device = torch.cuda.current_device()
    elif not isinstance(device, int):
        # a torch.device or "cuda:1"
        _need_torch()
        d = torch.device(device)
        if d.type != "cuda":
            raise ValueError(f"atk.open: device must be a CUDA device (got {device!r})")
        device = d.index if d.index is not None else torch.cuda.current_device()
    _need_torch()
    ctx = ctypes.c_void_p()
    rc = lib.atk_open(str(path).encode(), int(device), int(flags), ctypes.byref(ctx))
    if rc:
        raise AtkError(rc, f"atk.open({str(path)!r}): {_lib.text(lib.atk_errmsg(None))} "
                           f"(status {rc}: {_lib.text(lib.atk_errstr(rc))})")
    return Table(ctx.value, int(device), False, str(path))


def open_dry(path, gpu="NVIDIA H200", cc=90, sms=132, driver=13000, flags=0):
    """A table for a described GPU without touching one (atk_open_dry):
    explain/serves/report/stats work, and calls check their arguments,
    choose and count exactly as on that GPU, but launch nothing (tensors may
    be CUDA or meta; outputs are left unwritten)."""
    lib = _lib.load()
    _need_torch()
    g = _lib.GpuId(name=gpu.encode(), cc=int(cc), sms=int(sms), driver_version=int(driver))
    ctx = ctypes.c_void_p()
    rc = lib.atk_open_dry(str(path).encode(), None, ctypes.byref(g), int(flags), ctypes.byref(ctx))
    if rc:
        raise AtkError(rc, f"atk.open_dry({str(path)!r}): {_lib.text(lib.atk_errmsg(None))} "
                           f"(status {rc}: {_lib.text(lib.atk_errstr(rc))})")
    return Table(ctx.value, None, True, str(path))
