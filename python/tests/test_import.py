"""`import atk` is cheap (no libatk.so, no PyTorch), and a missing library
is reported with every place it was looked for."""

import os
import subprocess
import sys

import pytest

import atk
from atk import _lib
from conftest import ROOT


def test_import_loads_neither_torch_nor_libatk():
    code = ("import sys, atk; "
            "print('torch' in sys.modules, 'atk._lib' in sys.modules, 'atk.table' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    assert r.stdout.split() == ["False", "False", "False"]


def test_lazy_names_resolve():
    assert atk.Table.__name__ == "Table"
    assert atk.Choice.__name__ == "Choice"
    assert callable(atk.open) and callable(atk.open_dry) and callable(atk.patch)
    assert issubclass(atk.LibraryNotFound, ImportError)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        atk.nope


def test_atk_lib_missing_file_is_named(monkeypatch, tmp_path):
    missing = tmp_path / "nowhere" / "libatk.so"
    monkeypatch.setenv("ATK_LIB", str(missing))
    monkeypatch.setattr(_lib, "_lib", None)  # forget the loaded library for this test
    with pytest.raises(atk.LibraryNotFound) as e:
        atk.open_dry(ROOT / "cache" / "tables" / "qwen3.5-2b-h200.json")
    assert str(missing) in str(e.value)
    assert "ATK_LIB" in str(e.value)
    assert e.value.tried and str(missing) in e.value.tried[0]


def test_search_order_without_atk_lib(monkeypatch, tmp_path):
    monkeypatch.delenv("ATK_LIB", raising=False)
    monkeypatch.setenv("ATK_PREFIX", str(tmp_path))
    paths = [p for p, _ in _lib.candidates()]
    assert paths[0] == str(tmp_path / "lib" / "libatk.so")
    assert paths[1] == os.path.join(sys.prefix, "lib", "libatk.so")
    assert paths[2] == "/usr/local/lib/libatk.so"
    assert paths[3] == str(ROOT / "build" / "kernels" / "libatk.so")
    assert paths[4] == str(ROOT / "build-gpu" / "kernels" / "libatk.so")
    assert paths[-1] == "libatk.so"


def test_every_path_tried_is_listed(monkeypatch, tmp_path):
    monkeypatch.delenv("ATK_LIB", raising=False)
    monkeypatch.setenv("ATK_PREFIX", str(tmp_path))
    # a source checkout without a build: only non-existent files, and a
    # system loader that has no libatk.so under that name
    fake = [(str(tmp_path / "lib" / "libatk.so"), "ATK_PREFIX"),
            (str(tmp_path / "build" / "kernels" / "libatk.so"), "source checkout"),
            ("libatk-not-here.so", "system loader")]
    monkeypatch.setattr(_lib, "candidates", lambda: fake)
    monkeypatch.setattr(_lib, "_lib", None)
    with pytest.raises(atk.LibraryNotFound) as e:
        _lib.load()
    for path, _ in fake:
        assert path in str(e.value)
    assert len(e.value.tried) == 3
