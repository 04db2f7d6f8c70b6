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
