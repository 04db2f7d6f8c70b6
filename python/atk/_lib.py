"""ctypes binding of libatk.so: finds the library, declares every function of
kernels/atk.h with its argument and result types, and mirrors the public
structs (atk_gpu_id, atk_choice, atk_op_stats, atk_info) field for field.
Invariant: the Structure classes here have exactly the C layout of atk.h
(tests/test_layout.py compiles a C program that prints sizeof/offsetof and
compares); change both together."""

import ctypes
import os
import sys
from pathlib import Path

from .errors import LibraryNotFound

# enum atk_status
OK = 0
ERR_USAGE = 2
ERR_NOGPU = 4
ERR_CUDA = 5
ERR_CUDA_STICKY = 6
ERR_NVRTC = 7
ERR_TABLE = 8
ERR_IO = 9
ERR_NOMEM = 10
ERR_MISS = 12

# enum atk_dtype
BF16 = 1
FP16 = 2

# enum atk_op
OP_GEMV = 0
OP_RMSNORM = 1
OP_ADD_RMSNORM = 2
OP_GEMMA_RMSNORM = 3
OP_ADD_GEMMA_RMSNORM = 4
OP_GEMV_ADD = 5
OP_RMSNORM_GEMV = 6
OP_GEMMA_RMSNORM_GEMV = 7
OP_GEMV_SWIGLU = 8
OP_RMSNORM_GEMV_SWIGLU = 9
OP_GEMMA_RMSNORM_GEMV_SWIGLU = 10
OP_ADD_RMSNORM_GEMV = 11
OP_ADD_GEMMA_RMSNORM_GEMV = 12
NOPS = 13
OP_NAMES = ("gemv", "rmsnorm", "add_rmsnorm", "gemma_rmsnorm", "add_gemma_rmsnorm", "gemv_add", "rmsnorm_gemv",
            "gemma_rmsnorm_gemv", "gemv_swiglu", "rmsnorm_gemv_swiglu", "gemma_rmsnorm_gemv_swiglu",
            "add_rmsnorm_gemv", "add_gemma_rmsnorm_gemv")
# ATK_FUSED_COUNTER_BYTES: the zeroed counters at the start of every fused
# op's scratch (atk_fused_scratch_bytes counts them)
FUSED_COUNTER_BYTES = 256

# enum atk_path
PATH_TUNED = 1
PATH_INFERRED = 2
PATH_FALLBACK = 3
PATH_BUCKET = 4
PATH_NAMES = {PATH_TUNED: "tuned", PATH_INFERRED: "inferred", PATH_FALLBACK: "fallback", PATH_BUCKET: "bucket"}

from .flags import NO_INFER, NO_NVRTC, NO_OVERRIDES, SAME_DRIVER, STRICT, STRICT_OPEN, UNFUSED  # noqa: F401,E402


class GpuId(ctypes.Structure):
    """struct atk_gpu_id: the GPU an atk_open_dry context pretends to be."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("cc", ctypes.c_int),
        ("sms", ctypes.c_int),
        ("driver_version", ctypes.c_int),
    ]


class ChoiceC(ctypes.Structure):
    """struct atk_choice: how a call is (or would be) served."""
    _fields_ = [
        ("path", ctypes.c_int),
        ("strategy", ctypes.c_char_p),
        ("kernel", ctypes.c_char_p),
        ("params", ctypes.c_char_p),
        ("from_", ctypes.c_char_p),
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("smem", ctypes.c_uint),
        ("pdl", ctypes.c_int),
        ("recompiled", ctypes.c_int),
        ("bucket", ctypes.c_int),
        ("reason", ctypes.c_char * 160),
        ("key", ctypes.c_char_p),
    ]


class OpStats(ctypes.Structure):
    """struct atk_op_stats: one op's counters."""
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("calls", "tuned", "inferred", "fallback", "missed", "rejected", "bucket")]


class Info(ctypes.Structure):
    """struct atk_info: what atk_open found."""
    _fields_ = [
        ("device", ctypes.c_char * 128),
        ("cc", ctypes.c_int),
        ("sms", ctypes.c_int),
        ("driver_version", ctypes.c_int),
        ("dry", ctypes.c_int),
        ("rows", ctypes.c_size_t),
        ("for_this_gpu", ctypes.c_size_t),
        ("loaded", ctypes.c_size_t),
        ("recompiled", ctypes.c_size_t),
        ("failed", ctypes.c_size_t),
        ("all_fallback", ctypes.c_int),
    ]


_vp = ctypes.c_void_p
_i = ctypes.c_int
_u = ctypes.c_uint
_i64 = ctypes.c_int64
_f = ctypes.c_float
_cp = ctypes.c_char_p

# name: (restype, argtypes), in the order of atk.h. atk_ctx* and atk_stream
# are passed as void pointers (ints); the exported atk_table as an opaque
# pointer (Python builds none).
_SIGNATURES = {
    "atk_open": (_i, [_cp, _i, _u, ctypes.POINTER(_vp)]),
    "atk_open_table": (_i, [_vp, _i, _u, ctypes.POINTER(_vp)]),
    "atk_open_dry": (_i, [_cp, _vp, ctypes.POINTER(GpuId), _u, ctypes.POINTER(_vp)]),
    "atk_close": (None, [_vp]),
    "atk_gemv": (_i, [_vp, _vp, _i, _i64, _i64, _i64, _vp, _vp, _vp]),
    "atk_gemv_add": (_i, [_vp, _vp, _i, _i64, _i64, _i64, _vp, _vp, _vp]),
    "atk_rmsnorm_gemv": (_i, [_vp, _vp, _i, _i64, _i64, _i64, _vp, _vp, _vp, _vp, _f, _vp]),
    "atk_gemma_rmsnorm_gemv": (_i, [_vp, _vp, _i, _i64, _i64, _i64, _vp, _vp, _vp, _vp, _f, _vp]),
    "atk_gemv_swiglu": (_i, [_vp, _vp, _i, _i64, _i64, _i64, _vp, _vp, _vp, _vp, _vp]),
    "atk_rmsnorm_gemv_swiglu": (_i, [_vp, _vp, _i, _i64, _i64, _i64, _vp, _vp, _vp, _vp, _vp, _f, _vp]),
    "atk_gemma_rmsnorm_gemv_swiglu": (_i, [_vp, _vp, _i, _i64, _i64, _i64, _vp, _vp, _vp, _vp, _vp, _f, _vp]),
    "atk_add_rmsnorm_gemv": (_i, [_vp, _vp, _i, _i64, _i64, _i64, _vp, _vp, _vp, _vp, _vp, _f, _vp]),
    "atk_add_gemma_rmsnorm_gemv": (_i, [_vp, _vp, _i, _i64, _i64, _i64, _vp, _vp, _vp, _vp, _vp, _f, _vp]),
    "atk_fused_scratch_bytes": (ctypes.c_size_t, [_i, _i, _i64, _i64, _i64]),
    "atk_rmsnorm": (_i, [_vp, _vp, _i, _i64, _i64, _vp, _vp, _vp, _f]),
    "atk_add_rmsnorm": (_i, [_vp, _vp, _i, _i64, _i64, _vp, _vp, _vp, _vp, _f]),
    "atk_gemma_rmsnorm": (_i, [_vp, _vp, _i, _i64, _i64, _vp, _vp, _vp, _f]),
    "atk_add_gemma_rmsnorm": (_i, [_vp, _vp, _i, _i64, _i64, _vp, _vp, _vp, _vp, _f]),
    "atk_explain": (_i, [_vp, _i, _i, _i64, _i64, _i64, ctypes.POINTER(ChoiceC)]),
    "atk_stats": (_i, [_vp, _i, ctypes.POINTER(OpStats)]),
    "atk_stats_reset": (None, [_vp]),
    "atk_get_info": (_i, [_vp, ctypes.POINTER(Info)]),
    "atk_report": (_cp, [_vp]),
    "atk_op_name": (_cp, [_i]),
    "atk_errmsg": (_cp, [_vp]),
    "atk_errstr": (_cp, [_i]),
}

_NAME = "libatk.so"


def candidates():
    """The places libatk.so is looked for, in order, as (path, why) pairs.
    ATK_LIB, when set, is the only one: an explicit choice must not be
    silently replaced by another copy."""
    lib = os.environ.get("ATK_LIB")
    if lib:
        return [(lib, "ATK_LIB")]
    out = []
    prefix = os.environ.get("ATK_PREFIX")
    if prefix:
        out.append((os.path.join(prefix, "lib", _NAME), "ATK_PREFIX"))
    for p in (sys.prefix, "/usr/local"):
        out.append((os.path.join(p, "lib", _NAME), "prefix"))
    # a source checkout: python/atk/_lib.py -> the repository root
    root = Path(__file__).resolve().parents[2]
    if (root / "kernels" / "atk.h").is_file():
        for b in ("build", "build-gpu"):
            out.append((str(root / b / "kernels" / _NAME), "source checkout"))
    # last, the system loader's own search (LD_LIBRARY_PATH, ld.so.cache)
    out.append((_NAME, "system loader"))
    return out


def _declare(lib):
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


_lib = None


def load():
    """Returns the loaded library (once per process), or raises
    LibraryNotFound naming every path tried and why each failed."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path, why in candidates():
        if why != "system loader" and not os.path.isfile(path):
            tried.append(f"  {path} ({why}): no such file")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"  {path} ({why}): {e}")
            continue
        try:
            _lib = _declare(lib)
        except AttributeError as e:
            tried.append(f"  {path} ({why}): not the atk runtime of this package ({e})")
            continue
        _lib.path = path
        return _lib
    raise LibraryNotFound(
        "atk: libatk.so not found; looked in:\n" + "\n".join(tried) +
        "\nbuild it (cmake --build build) or set ATK_LIB to the file, or ATK_PREFIX to its install prefix",
        tried)


def text(p):
    """A C string from the library as str ("" for NULL)."""
    return p.decode("utf-8", "replace") if p else ""
