"""atk: PyTorch bindings of the autotune runtime (libatk.so).

    import atk
    with atk.open("tune.db") as t:            # or a JSON table
        y = t.gemv(x, W)                      # x [M,K], W [N,K] bf16/fp16 CUDA
        print(t.explain("gemv", "bf16", 1, 2048, 8192).path)

`import atk` loads neither libatk.so nor PyTorch: the library is loaded by
the first open (atk._lib says where it is looked for), PyTorch by the first
call that needs it, and the custom ops (torch.ops.atk.*) by `import atk.ops`
or atk.patch."""

from .errors import AtkError, LibraryNotFound

__version__ = "0.4.0"

from .flags import NO_INFER, NO_NVRTC, NO_OVERRIDES, SAME_DRIVER, STRICT, STRICT_OPEN, UNFUSED

__all__ = ["open", "open_dry", "patch", "AtkError", "LibraryNotFound", "Table", "Choice", "Patch",
           "STRICT_OPEN", "STRICT", "NO_INFER", "NO_NVRTC", "SAME_DRIVER", "NO_OVERRIDES", "UNFUSED"]

# name -> (module, attribute), imported on first use (module __getattr__)
_LAZY = {
    "open": ("table", "open"),
    "open_dry": ("table", "open_dry"),
    "Table": ("table", "Table"),
    "Choice": ("table", "Choice"),
    "patch": ("patch", "patch"),
    "Patch": ("patch", "Patch"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{mod}", __name__), attr)
        globals()[name] = value
        return value
    if name in ("ops", "overhead", "table", "patch"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'atk' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
