"""The ctypes structs of atk._lib have exactly the C layout of kernels/atk.h:
a C program compiled against the header prints sizeof and offsetof of every
field, and each must equal the ctypes figure. Skips without a C compiler."""

import ctypes
import shutil
import subprocess

import pytest

from atk import _lib
from conftest import ROOT

# ctypes struct -> (C type, {ctypes field: C field})
STRUCTS = {
    _lib.GpuId: ("atk_gpu_id", {}),
    _lib.ChoiceC: ("atk_choice", {"from_": "from"}),
    _lib.OpStats: ("atk_op_stats", {}),
    _lib.Info: ("atk_info", {}),
}


def test_struct_layout_matches_header(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler (cc/gcc/clang) to compile the layout probe")
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "atk.h"', "int main(void) {"]
    expect = []
    for cls, (ctype, rename) in STRUCTS.items():
        lines.append(f'printf("%zu\\n", sizeof({ctype}));')
        expect.append((f"sizeof({ctype})", ctypes.sizeof(cls)))
        for f, _ in cls._fields_:
            cf = rename.get(f, f)
            lines.append(f'printf("%zu\\n", offsetof({ctype}, {cf}));')
            expect.append((f"offsetof({ctype}, {cf})", getattr(cls, f).offset))
    lines.append("return 0; }")
    src = tmp_path / "probe.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "probe"
    subprocess.run([cc, "-I", str(ROOT / "kernels"), "-o", str(exe), str(src)], check=True)
    got = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    assert len(got) == len(expect)
    for (what, want), have in zip(expect, got):
        assert want == have, f"{what}: C says {have}, ctypes {want}"


def test_every_header_function_is_declared():
    header = (ROOT / "kernels" / "atk.h").read_text()
    import re
    names = set(re.findall(r"ATK_API\s+[\w\s\*]+?\b(atk_\w+)\s*\(", header))
    assert names and names == set(_lib._SIGNATURES)
    lib = _lib.load()
    for n in names:
        assert getattr(lib, n).argtypes is not None, n


def test_op_codes_match_header():
    # enum atk_op, ATK_NOPS and ATK_FUSED_COUNTER_BYTES as _lib spells them;
    # each op's name as the library's atk_op_name says it
    header = (ROOT / "kernels" / "atk.h").read_text()
    import re
    ops = {m[0]: int(m[1]) for m in re.findall(r"\bATK_OP_(\w+)\s*=\s*(\d+)", header)}
    assert ops and sorted(ops.values()) == list(range(len(ops)))
    for name, code in ops.items():
        assert getattr(_lib, f"OP_{name}") == code, name
        assert _lib.OP_NAMES[code] == name.lower()
    assert int(re.search(r"\bATK_NOPS\s*=\s*(\d+)", header)[1]) == _lib.NOPS == len(_lib.OP_NAMES) == len(ops)
    assert int(re.search(r"#define\s+ATK_FUSED_COUNTER_BYTES\s+(\d+)", header)[1]) == _lib.FUSED_COUNTER_BYTES
    lib = _lib.load()
    assert [_lib.text(lib.atk_op_name(i)) for i in range(_lib.NOPS)] == list(_lib.OP_NAMES)
