"""test_report.py: `python -m atk report` against a fixture cache built from
cache/schema.sql (fixtures/make_cache.py): every figure is an inline PNG, the
tables match the winners stored, the options select what they say, every bad
input exits 2 naming the file and writes nothing, and (where chromium is on
PATH) a headless browser renders the page with every figure decoded.
No GPU, no torch: matplotlib and pytest only.
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import warnings

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
sys.path.insert(0, PYDIR)
sys.path.insert(0, os.path.join(HERE, "fixtures"))

from atk import report  # noqa: E402
import make_cache  # noqa: E402

FIGURES_PER_OP = 4  # speedup, % of ceiling, candidate times, PDL pairs
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class Page(html.parser.HTMLParser):
    """What the tests read back from a report: images, winners tables, meta, title."""

    def __init__(self, text: str):
        super().__init__()
        self.imgs, self.tables, self.meta, self.title, self.refs = [], [], {}, "", []
        self._cell = self._row = None
        self._in_title = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for name in ("src", "href"):
            if name in a:
                self.refs.append(a[name])
        if tag == "img":
            self.imgs.append(a)
        elif tag == "meta" and "name" in a:
            self.meta[a["name"]] = a.get("content")
        elif tag == "table" and a.get("class") == "winners":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = ""
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:  # the header row has th cells only
                self.tables[-1].append(self._row)
            self._row = None
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._in_title:
            self.title += data


def run_report(*args: str) -> int:
    return report.main(list(args))


def sha256_of(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """(path, winners by shape, sha256 of the file as written)"""
    path = str(tmp_path_factory.mktemp("cache") / "tune.db")
    winners = make_cache.make_cache(path)
    return path, winners, sha256_of(path)


@pytest.fixture(scope="module")
def page(cache, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("page") / "report.html")
    assert run_report("--db", cache[0], "-o", out) == 0
    with open(out, encoding="utf-8") as f:
        text = f.read()
    return out, text, Page(text)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC, "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_every_figure_is_an_inline_png(page):
    _, text, p = page
    ops = 2  # gemv bf16, rmsnorm bf16
    assert len(p.imgs) == ops * FIGURES_PER_OP
    assert p.meta["atk-figures"] == str(len(p.imgs))
    for img in p.imgs:
        src = img["src"]
        assert src.startswith("data:image/png;base64,")
        w, h = png_size(base64.b64decode(src.split(",", 1)[1], validate=True))
        assert 300 <= w <= 2000 and 200 <= h <= 1500, (w, h)
    # self-contained: every reference is inline data
    assert p.refs and all(r.startswith("data:") for r in p.refs)
    assert "url(" not in text and "@import" not in text


def test_table_rows_match_the_winners(cache, page):
    path, stored = cache[0], cache[1]
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    read = db.execute("SELECT read_gbps FROM devices").fetchone()[0]
    want = {}
    for op, shape, strategy, params, us, base, speedup, nbytes in db.execute(
        "SELECT op, shape, strategy, params, us, baseline_us, speedup, bytes FROM winners"
    ):
        want.setdefault(op, []).append(
            [shape, strategy, f"{us:.2f}", f"{base:.2f}", f"{speedup:.2f}x",
             f"{100 * nbytes / (us * 1e3) / read:.0f}%", params]
        )
    db.close()
    tables = page[2].tables
    assert len(tables) == len(want) == 2
    # ops in name order, shapes in numeric order
    got = dict(zip(sorted(want), tables))
    for op in want:
        assert sorted(got[op]) == sorted(want[op])
    assert [r[0] for r in got["gemv"]] == ["1x2048x5120", "1x2048x8192"]
    assert {r[0]: r[1] for t in tables for r in t} == {s: w["strategy"] for s, w in stored.items()}


def test_default_shape_is_the_one_with_most_trials(cache, page):
    text = page[1]
    # both GEMV shapes have the same count: the first in order is taken
    assert "candidate of 1x2048x5120 (the shape with the most trials)" in text
    assert "candidate of 1x4096 (the shape with the most trials)" in text


def test_shape_and_device_options(cache, tmp_path):
    out = str(tmp_path / "r.html")
    assert run_report("--db", cache[0], "-o", out, "--shape", "1x2048x8192", "--device", "nvidia h200") == 0
    text = open(out, encoding="utf-8").read()
    assert "NVIDIA H200 (sm_90, 132 SMs)" in text  # --device is case-insensitive
    assert "Every timed candidate of 1x2048x8192," in text
    assert "1x2048x8192 candidate times" in text
    # an op that lacks the shape says so and keeps its own default
    assert "1x2048x8192 is not tuned for this op" in text
    assert len(Page(text).imgs) == 2 * FIGURES_PER_OP


def test_no_pdl_pairs_is_said(tmp_path):
    db, out = str(tmp_path / "nopdl.db"), str(tmp_path / "r.html")
    make_cache.make_cache(db, pdl_pairs=False)
    assert run_report("--db", db, "-o", out) == 0
    text = open(out, encoding="utf-8").read()
    assert text.count("this cache has no PDL pairs") == 2
    assert len(Page(text).imgs) == 2 * (FIGURES_PER_OP - 1)


def test_sparse_cache_says_what_is_missing(tmp_path):
    # no device row (no ceilings) and a shape whose trials are gone
    db, out = str(tmp_path / "sparse.db"), str(tmp_path / "r.html")
    make_cache.make_cache(db)
    con = sqlite3.connect(db)
    con.execute("DELETE FROM devices")
    con.execute("DELETE FROM trials WHERE op = 'rmsnorm'")
    con.commit()
    con.close()
    assert run_report("--db", db, "-o", out) == 0
    text = open(out, encoding="utf-8").read()
    p = Page(text)
    assert "No device row with measured ceilings" in text
    assert text.count("no bandwidth plot") == 2
    assert "1x4096 (the shape with the most trials): no timed candidates" in text
    assert "rmsnorm bf16: this cache has no PDL pairs" in text
    # gemv: speedup, times, PDL; rmsnorm: speedup
    assert len(p.imgs) == 4
    assert all(row[5] == "\u2014" for t in p.tables for row in t)  # % of ceiling unknown


def test_pdl_pairs_differ_only_in_tp_pdl():
    T = report.Trial
    trials = [
        T("splitk", "TP_A=1 TP_PDL=0", "ok", 10.0),
        T("splitk", "TP_A=1 TP_PDL=1", "ok", 8.0),
        T("splitk", "TP_A=2 TP_PDL=1", "ok", 7.0),  # no partner
        T("warp_row", "TP_A=1 TP_PDL=0", "ok", 9.0),  # another strategy
        T("splitk", "TP_A=3 TP_PDL=0", "ok", 9.0),
        T("splitk", "TP_A=3 TP_PDL=1", "wrong", None),  # not timed
    ]
    assert [(a.us, b.us) for a, b in report.pdl_pairs(trials)] == [(10.0, 8.0)]


def test_every_op_has_its_baseline_label():
    # the fused ops are measured against the runtime's unfused sequence
    # (tuner/op_fused.c, baseline 0), not against a naive fused kernel
    from atk import _lib
    fused = _lib.OP_NAMES[_lib.OP_RMSNORM_GEMV:]
    assert set(report.FUSED_OPS) == set(fused) and len(fused) == 7
    for op in _lib.OP_NAMES:
        want = ("cuBLAS" if op == "gemv" else "cuBLAS + add kernel" if op == "gemv_add" else
                "atk unfused sequence" if op in fused else "naive fused kernel")
        assert report.BASELINE_LABEL.get(op, report.DEFAULT_BASELINE_LABEL) == want, op


def test_the_cache_is_not_changed(cache, page):
    # opened read-only: the report (page fixture) left the file as written
    assert sha256_of(cache[0]) == cache[2]


# ------------------------------------------------------------ error paths


def _sqlite(path, sql):
    db = sqlite3.connect(path)
    db.executescript(sql)
    db.commit()
    db.close()


def _bad_inputs(tmp, good):
    """name -> (db path, extra args, words the message must hold)"""
    missing = str(tmp / "absent.db")
    text = tmp / "notes.db"
    text.write_text("not a database\n" * 4)
    empty = tmp / "empty.db"
    empty.write_bytes(b"")
    other = str(tmp / "other.db")
    _sqlite(other, "CREATE TABLE t (x INTEGER);")
    newer = str(tmp / "newer.db")
    _sqlite(newer, "CREATE TABLE devices (x); CREATE TABLE trials (x); CREATE TABLE winners (x); PRAGMA user_version = 9;")
    nowin = str(tmp / "nowinners.db")
    with open(make_cache.SCHEMA, encoding="utf-8") as f:
        _sqlite(nowin, f.read())
    return {
        "missing": (missing, [], "no such file"),
        "text": (str(text), [], "not an autotune cache"),
        "empty": (str(empty), [], "not an autotune cache"),
        "other": (other, [], "not an autotune cache"),
        "newer": (newer, [], "newer"),
        "no_winners": (nowin, [], "no winners"),
        "device": (good, ["--device", "NVIDIA B200"], "no device 'NVIDIA B200'"),
        "shape": (good, ["--shape", "7x7x7"], "no tuned shape '7x7x7'"),
        "directory": (str(tmp), [], "not a regular file"),
    }


@pytest.mark.parametrize("case", ["missing", "text", "empty", "other", "newer", "no_winners", "device", "shape", "directory"])
def test_bad_input_exits_2_naming_the_file(case, cache, tmp_path, capsys):
    db, extra, words = _bad_inputs(tmp_path, cache[0])[case]
    out = tmp_path / "out" / "r.html"
    out.parent.mkdir()
    assert run_report("--db", db, "-o", str(out), *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("atk report: error: ") and db in err and words in err, err
    assert list(out.parent.iterdir()) == []  # nothing written, no temporary left


def test_cli_process_exit_status_and_default_path(tmp_path):
    # no --db: the tuner's default path under XDG_CACHE_HOME, named in the error
    env = dict(os.environ, PYTHONPATH=PYDIR, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    r = subprocess.run([sys.executable, "-m", "atk", "report", "-o", "r.html"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert str(tmp_path / "xdg" / "autotune" / "tune.db") in r.stderr
    assert not (tmp_path / "r.html").exists()
    env.pop("XDG_CACHE_HOME")
    env["HOME"] = str(tmp_path)
    assert report.default_db_path().endswith(os.path.join("autotune", "tune.db"))
    r = subprocess.run([sys.executable, "-m", "atk", "report", "--help"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0
    for opt in ("--db", "--output", "--device", "--shape", "exit status"):
        assert opt in r.stdout


def test_unwritable_output_is_an_error(cache, tmp_path, capsys):
    out = str(tmp_path / "no" / "such" / "dir" / "r.html")
    assert run_report("--db", cache[0], "-o", out) == 2
    assert out in capsys.readouterr().err


# -------------------------------------------------------- headless browser


def _chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    reason = "chromium is not on PATH (apt-get install -y chromium): the page was not rendered in a browser"
    if os.environ.get("AT_REQUIRE_CHROMIUM") == "1":
        pytest.fail(reason + " and AT_REQUIRE_CHROMIUM=1")
    warnings.warn(reason)  # shown in the summary even without -rs
    pytest.skip(reason)


def test_chromium_renders_every_figure(page, tmp_path):
    import matplotlib.image

    exe = _chromium()
    out, _, p = page
    n = len(p.imgs)
    common = [exe, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
    url = "file://" + os.path.abspath(out)
    shot = tmp_path / "report.png"
    height = 600 + 420 * n
    r = subprocess.run(common + [f"--screenshot={shot}", f"--window-size=1200,{height}", url],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    px = matplotlib.image.imread(str(shot))
    assert px.shape[0] == height and px.shape[1] == 1200
    rgb = px[..., :3]
    inked = (rgb.mean(axis=2) < 0.9).mean()  # share of pixels that are not near-white
    assert rgb.std() > 0.05 and inked > 0.02, (rgb.std(), inked)
    # the page's own script counts the images the browser decoded
    r = subprocess.run(common + ["--virtual-time-budget=5000", "--dump-dom", url],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'data-rendered="(\d+)"', r.stdout)
    assert m, "the page's load script did not run"
    assert int(m.group(1)) == n
    assert f"<title>rendered {n} of {n} figures</title>" in r.stdout
