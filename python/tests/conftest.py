"""Shared pytest setup: the source tree's package first on sys.path (so the
tests exercise this checkout, installed or not), the `gpu` marker, and the
shipped H200 table opened dry (no GPU needed)."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import atk  # noqa: E402

# the shipped table; its one device: "NVIDIA H200", sm_90, 132 SMs, driver 13000
TABLE = ROOT / "cache" / "tables" / "qwen3.5-2b-h200.json"


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and a table for it (skips visibly otherwise)")


@pytest.fixture
def dry():
    """The shipped table opened for the H200 it was tuned on, without a GPU."""
    t = atk.open_dry(TABLE, gpu="NVIDIA H200", cc=90, sms=132, driver=13000)
    yield t
    t.close()


@pytest.fixture(scope="module")
def gpu_table():
    """The shipped table opened on the GPU, or a visible skip: no CUDA GPU,
    or a GPU the table has no entries for (it was tuned on an H200)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch (torch.cuda.is_available() is False)")
    t = atk.open(TABLE)
    if t.explain("gemv", "bf16", 1, 2048, 2048).path != "tuned":
        name = torch.cuda.get_device_name()
        t.close()
        pytest.skip(f"the shipped table has no entries for {name} (tuned on an NVIDIA H200)")
    yield t
    t.close()
