"""atk.flags: the flags of atk.open / atk.open_dry (kernels/atk.h, enum
atk_flags), or-ed; no import of ctypes, torch or the library."""

STRICT_OPEN = 1 << 0   # a missing, corrupt or foreign table fails open instead of falling back
STRICT = 1 << 1        # a call without an exact tuned entry fails (tests)
NO_INFER = 1 << 2      # never borrow another K, N's kernel
NO_NVRTC = 1 << 3      # never recompile a cubin that does not load
SAME_DRIVER = 1 << 4   # only entries tuned under the present driver
NO_OVERRIDES = 1 << 5  # ignore validation overrides: the table as tuned
UNFUSED = 1 << 6       # load no fused-op entry: fused calls run their unfused sequence
