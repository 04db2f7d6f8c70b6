"""Runs this pytest suite for CTest (tests/CMakeLists.txt: test_python,
test_python_gpu), and examples/torch_decode's tests with it. `ctest_run.py
cpu` runs the tests not marked gpu,
`ctest_run.py gpu` those marked gpu. When pytest or PyTorch cannot be
imported (or, for gpu, no CUDA GPU is visible) it says why and exits 77,
CTest's SKIP_RETURN_CODE; with AT_REQUIRE_PYTHON=1 a missing module fails
instead (exit 1)."""

import importlib.util
import os
import sys

SKIP = 77


def main(argv):
    kind = argv[1] if len(argv) > 1 else "cpu"
    if kind not in ("cpu", "gpu"):
        print(f"usage: {argv[0]} cpu|gpu [pytest args]", file=sys.stderr)
        return 2
    missing = [m for m in ("pytest", "torch") if importlib.util.find_spec(m) is None]
    if missing:
        why = f"python tests: {', '.join(missing)} not importable by {sys.executable}"
        if os.environ.get("AT_REQUIRE_PYTHON") == "1":
            print(f"{why} (AT_REQUIRE_PYTHON=1: failing)")
            return 1
        print(f"{why}: skipped (pip install torch pytest, or configure with -DPython3_EXECUTABLE=...)")
        return SKIP
    if kind == "gpu":
        import torch
        if not torch.cuda.is_available():
            print("python gpu tests: no CUDA GPU visible to PyTorch: skipped")
            return SKIP
    import pytest
    sys.dont_write_bytecode = True  # keep the source tree clean
    here = os.path.dirname(os.path.abspath(__file__))
    example = os.path.join(here, "..", "..", "examples", "torch_decode")
    rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", "-m", "gpu" if kind == "gpu" else "not gpu", here,
                      os.path.normpath(example), *argv[2:]])
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
