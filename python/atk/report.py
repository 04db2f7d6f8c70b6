"""atk.report: the tuning report, one self-contained HTML page read from an
autotune cache (the SQLite file of cache/schema.sql), opened read-only.

Per GPU and op (op and dtype): a table of the winners, the speedup over the
baseline per shape, the percent of the read ceiling against bytes moved, the
candidates' times for one shape, and TP_PDL=1 against TP_PDL=0 for the
candidates that differ only there. Images are inline base64 PNGs drawn with
matplotlib (Agg, no pyplot state): the page references nothing outside it.
Invariant: on any error nothing is written (the page goes to a temporary file
beside the output and is renamed into place only when complete).
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime
import html
import io
import math
import os
import sqlite3
import sys
import tempfile
import urllib.parse

SCHEMA_VERSION = 1  # cache/schema.sql's user_version (cache.h AT_SCHEMA_VERSION)
REQUIRED_TABLES = ("devices", "trials", "winners")
SQLITE_MAGIC = b"SQLite format 3\x00"

# The yardstick each op's speedup is measured against (tuner/op_*.c, baseline
# 0): cuBLAS for GEMV, cuBLAS + an add kernel for gemv_add, the runtime's own
# unfused sequence for the fused decode ops (atk._lib.OP_NAMES from
# rmsnorm_gemv on), the naive fused kernel for the norms.
FUSED_OPS = ("rmsnorm_gemv", "gemma_rmsnorm_gemv", "gemv_swiglu", "rmsnorm_gemv_swiglu", "gemma_rmsnorm_gemv_swiglu",
             "add_rmsnorm_gemv", "add_gemma_rmsnorm_gemv")
BASELINE_LABEL = {"gemv": "cuBLAS", "gemv_add": "cuBLAS + add kernel",
                  **{op: "atk unfused sequence" for op in FUSED_OPS}}
DEFAULT_BASELINE_LABEL = "naive fused kernel"  # the norm ops

FIG_W, FIG_H, FIG_DPI = 7.0, 3.6, 100  # 700 x 360 px per figure


class ReportError(Exception):
    """A problem with the input or the arguments; the message names the file."""


# ------------------------------------------------------------------ data


@dataclasses.dataclass
class Device:
    """One row of the devices table: the GPU and its measured ceilings."""

    name: str
    cc: int
    sms: int
    read_gbps: float | None = None
    copy_gbps: float | None = None
    empty_us: float | None = None
    l2_bytes: int = 0
    mem_bytes: int = 0
    measured_at: str = ""

    @property
    def label(self) -> str:
        return f"{self.name} (sm_{self.cc}, {self.sms} SMs)"


@dataclasses.dataclass
class Trial:
    """One candidate's result under a winner's key (failed ones: us is None)."""

    strategy: str
    params: str
    state: str
    us: float | None


@dataclasses.dataclass
class Winner:
    """The answer for one shape: a tuned kernel or the baseline itself."""

    key_sha: str
    op: str
    dtype: str
    shape: str
    strategy: str
    template_name: str
    params: str
    us: float | None
    baseline_us: float | None
    speedup: float | None
    bytes: float | None
    created_at: str
    trials: list[Trial] = dataclasses.field(default_factory=list)

    @property
    def is_baseline(self) -> bool:
        # the baseline's row (tuner/op_*.c baseline_winner): no template
        # (cuBLAS) or one of templates/baseline/ (the naive norm)
        return self.template_name == "" or self.template_name.startswith("baseline/")


@dataclasses.dataclass
class OpGroup:
    """The winners of one op and dtype on one device, shapes in order."""

    op: str
    dtype: str
    winners: list[Winner]
    superseded: int = 0  # older winners of the same shape (other options)

    @property
    def label(self) -> str:
        return f"{self.op} {self.dtype}"


@dataclasses.dataclass
class DeviceGroup:
    device: Device
    ops: list[OpGroup]


def default_db_path() -> str:
    """The tuner's default cache: $XDG_CACHE_HOME/autotune/tune.db (an
    absolute XDG_CACHE_HOME only), else ~/.cache/autotune/tune.db."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "autotune", "tune.db")
    return os.path.join(os.path.expanduser("~"), ".cache", "autotune", "tune.db")


def shape_key(shape: str) -> tuple:
    """Sorts "1x2048x8192" numerically (by K, N, then M); odd text last."""
    try:
        dims = [int(d) for d in shape.split("x")]
    except ValueError:
        return (1, shape)
    return (0, dims[1:] + dims[:1])


def parse_params(params: str) -> dict[str, str]:
    """"TP_A=1 TP_B=2" -> {"TP_A": "1", "TP_B": "2"}; words without "=" are kept as keys."""
    out = {}
    for word in params.split():
        name, _, value = word.partition("=")
        out[name] = value
    return out


def _open_ro(path: str) -> sqlite3.Connection:
    """Checks `path` is an autotune cache and opens it read-only."""
    if not os.path.exists(path):
        raise ReportError(f"{path}: no such file (tune first, or pass --db FILE)")
    if not os.path.isfile(path):
        raise ReportError(f"{path} is not an autotune cache (not a regular file)")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as e:
        raise ReportError(f"{path}: cannot read: {e.strerror}") from None
    if not head:
        raise ReportError(f"{path} is not an autotune cache (empty file)")
    if head != SQLITE_MAGIC:
        raise ReportError(f"{path} is not an autotune cache (not an SQLite database)")
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        try:
            db = sqlite3.connect(uri, uri=True)
            version = db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.OperationalError:
            # a WAL cache in a folder we cannot write (no -shm to make):
            # read the file as it is, with no locking
            db = sqlite3.connect(uri + "&immutable=1", uri=True)
            version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as e:
        raise ReportError(f"{path} is not an autotune cache (sqlite: {e})") from None
    missing = [t for t in REQUIRED_TABLES if t not in tables]
    if version > SCHEMA_VERSION:
        db.close()
        raise ReportError(f"{path} has schema version {version}, newer than this report ({SCHEMA_VERSION})")
    if version != SCHEMA_VERSION or missing:
        db.close()
        why = f"user_version {version}" + (f", no table {', '.join(missing)}" if missing else "")
        raise ReportError(f"{path} is not an autotune cache ({why})")
    return db


def _num(v):
    """A REAL column: NULL (a NaN the tuner did not measure) stays None."""
    return None if v is None else float(v)


def load(path: str) -> list[DeviceGroup]:
    """Reads every device, winner and trial of the cache at `path`.
    Raises ReportError naming the file when it is not a readable autotune
    cache or holds no winners."""
    db = _open_ro(path)
    try:
        return _load(db, path)
    except sqlite3.Error as e:
        raise ReportError(f"{path}: sqlite: {e}") from None
    finally:
        db.close()


def _load(db: sqlite3.Connection, path: str) -> list[DeviceGroup]:
    devices = {}
    for r in db.execute(
        "SELECT name, cc_major, cc_minor, sms, read_gbps, copy_gbps, empty_us, l2_bytes,"
        " mem_bytes, measured_at FROM devices"
    ):
        d = Device(r[0], 10 * r[1] + r[2], r[3], _num(r[4]), _num(r[5]), _num(r[6]), r[7], r[8], r[9])
        devices[(d.name, d.cc, d.sms)] = d
    # newest first, as warm start reads them: the first of a shape is shown
    rows = db.execute(
        "SELECT key_sha, op, dtype, shape, device, cc, sms, strategy, template_name, params, us, baseline_us,"
        " speedup, bytes, created_at FROM winners ORDER BY created_at DESC, rowid DESC"
    ).fetchall()
    if not rows:
        raise ReportError(f"{path}: the cache holds no winners (nothing tuned yet); no report written")
    groups: dict[tuple, dict[tuple, OpGroup]] = {}
    for r in rows:
        dkey = (r[4], r[5], r[6])
        if dkey not in devices:  # a winner whose device row is gone: no ceilings
            devices[dkey] = Device(*dkey)
        w = Winner(*r[0:4], *r[7:10], *map(_num, r[10:14]), r[14])
        ops = groups.setdefault(dkey, {})
        g = ops.setdefault((w.op, w.dtype), OpGroup(w.op, w.dtype, []))
        if any(x.shape == w.shape for x in g.winners):
            g.superseded += 1
            continue
        g.winners.append(w)
    for ops in groups.values():
        for g in ops.values():
            g.winners.sort(key=lambda w: shape_key(w.shape))
            for w in g.winners:
                w.trials = [
                    Trial(t[0], t[1], t[2], _num(t[3]))
                    for t in db.execute(
                        "SELECT strategy, params, state, us FROM trials WHERE key_sha = ? ORDER BY id",
                        (w.key_sha,),
                    )
                ]
    out = []
    for dkey in sorted(groups):
        ops = [groups[dkey][k] for k in sorted(groups[dkey])]
        out.append(DeviceGroup(devices[dkey], ops))
    return out


def select(groups: list[DeviceGroup], path: str, device: str | None, shape: str | None) -> list[DeviceGroup]:
    """Keeps the devices named `device` (case-insensitive; None: all) and
    checks `shape` is tuned on one of them. ReportError lists what is there."""
    if device is not None:
        kept = [g for g in groups if g.device.name.lower() == device.lower()]
        if not kept:
            names = sorted({g.device.name for g in groups})
            raise ReportError(f"{path}: no device '{device}' (devices there: {', '.join(names)})")
        groups = kept
    if shape is not None:
        shapes = sorted({w.shape for g in groups for o in g.ops for w in o.winners}, key=shape_key)
        if shape not in shapes:
            raise ReportError(f"{path}: no tuned shape '{shape}' (shapes there: {', '.join(shapes)})")
    return groups


# ----------------------------------------------------------------- plots


def _gbps(bytes_, us):
    return bytes_ / (us * 1e3) if bytes_ and us and us > 0 else None


def pct_ceiling(w: Winner, dev: Device, us: float | None = None) -> float | None:
    """Achieved bandwidth (winners.bytes per call / time) as a percent of the
    device's streaming-read ceiling; None when either is unknown."""
    g = _gbps(w.bytes, w.us if us is None else us)
    return 100.0 * g / dev.read_gbps if g and dev.read_gbps else None


def _timed(t: Trial) -> bool:
    return t.state == "ok" and t.us is not None and t.us > 0


def pdl_pairs(trials: list[Trial]) -> list[tuple[Trial, Trial]]:
    """(no PDL, PDL) pairs of timed candidates whose strategy and params
    are equal but for TP_PDL=0 / TP_PDL=1."""
    halves: dict[tuple, dict[str, Trial]] = {}
    for t in trials:
        p = parse_params(t.params)
        if t.state != "ok" or not t.us or t.us <= 0 or p.get("TP_PDL") not in ("0", "1"):
            continue
        rest = tuple(sorted((k, v) for k, v in p.items() if k != "TP_PDL"))
        halves.setdefault((t.strategy, rest), {})[p["TP_PDL"]] = t
    return [(h["0"], h["1"]) for h in halves.values() if "0" in h and "1" in h]


def default_shape(g: OpGroup) -> Winner:
    """The op's shape with the most trials (the first in order on a tie)."""
    return max(g.winners, key=lambda w: len(w.trials))


def _figure():
    from matplotlib.figure import Figure  # Agg canvas, no pyplot global state

    fig = Figure(figsize=(FIG_W, FIG_H), dpi=FIG_DPI)
    return fig, fig.add_subplot(1, 1, 1)


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def plot_speedup(g: OpGroup, base: str) -> str:
    fig, ax = _figure()
    shapes = [w.shape for w in g.winners]
    vals = [w.speedup if w.speedup and w.speedup > 0 else 0.0 for w in g.winners]
    colors = ["#9e9e9e" if w.is_baseline else "#2e7d32" for w in g.winners]
    bars = ax.bar(range(len(shapes)), vals, color=colors, width=0.5)
    ax.set_xlim(-0.75, len(shapes) - 0.25)
    for b, v in zip(bars, vals):
        ax.annotate(f"{v:.2f}x", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="#c62828", linestyle="--", linewidth=1, label=f"{base} (1.0)")
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels(shapes, rotation=30 if len(shapes) > 4 else 0, ha="right" if len(shapes) > 4 else "center")
    ax.set_ylabel(f"speedup over {base}")
    ax.set_ylim(0, max(vals + [1.0]) * 1.15)
    ax.set_title(f"{g.label}: speedup per shape (grey: the baseline won)")
    ax.legend(loc="upper right", fontsize=8)
    return _png(fig)


def plot_ceiling(g: OpGroup, dev: Device, base: str) -> str:
    fig, ax = _figure()
    for label, marker, color, us_of in (
        ("tuned", "o", "#2e7d32", lambda w: w.us),
        (base, "x", "#c62828", lambda w: w.baseline_us),
    ):
        pts = [(w.bytes, pct_ceiling(w, dev, us_of(w)), w.shape) for w in g.winners]
        pts = [p for p in pts if p[1] is not None]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=label, zorder=3)
        if label == "tuned":
            for x, y, s in pts:
                ax.annotate(s, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.axhline(100.0, color="#555555", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.margins(x=0.3)  # room for the shape labels
    ax.set_xlabel("bytes moved per call")
    ax.set_ylabel("% of the read ceiling")
    ax.set_ylim(0, 110)
    ax.set_title(f"{g.label}: bandwidth, read ceiling {dev.read_gbps:.0f} GB/s")
    ax.legend(loc="lower right", fontsize=8)
    return _png(fig)


def plot_distribution(g: OpGroup, w: Winner, base: str) -> str:
    import random

    fig, ax = _figure()
    timed = [t for t in w.trials if _timed(t)]
    strategies = sorted({t.strategy for t in timed})
    jitter = random.Random(0)  # the same page for the same cache
    for i, s in enumerate(strategies):
        for pdl, color in (("0", "#1565c0"), ("1", "#ef6c00")):
            xs = [t.us for t in timed if t.strategy == s and parse_params(t.params).get("TP_PDL", "0") == pdl]
            ys = [i + jitter.uniform(-0.3, 0.3) for _ in xs]
            label = f"TP_PDL={pdl}" if i == 0 else None
            ax.scatter(xs, ys, s=10, alpha=0.6, color=color, label=label)
    if w.us is not None:
        ax.axvline(w.us, color="#2e7d32", linewidth=1.5, label=f"winner {w.us:.2f} us")
    if w.baseline_us is not None:
        ax.axvline(w.baseline_us, color="#c62828", linestyle="--", linewidth=1.5, label=f"{base} {w.baseline_us:.2f} us")
    ax.set_yticks(range(len(strategies)))
    ax.set_yticklabels(strategies)
    ax.set_ylim(-0.6, max(len(strategies), 1) - 0.4)
    xs = [t.us for t in timed] + [v for v in (w.us, w.baseline_us) if v]
    if xs and max(xs) > 8 * min(xs):
        ax.set_xscale("log")
    ax.set_xlabel("time per call, us")
    ax.set_title(f"{g.label} {w.shape}: {len(timed)} timed candidates")
    ax.legend(loc="best", fontsize=7)
    return _png(fig)


def plot_pdl(g: OpGroup, pairs: dict[str, list[tuple[Trial, Trial]]]) -> str:
    fig, ax = _figure()
    lo, hi = math.inf, 0.0
    for shape, ps in pairs.items():
        xs, ys = [a.us for a, _ in ps], [b.us for _, b in ps]
        ratios = sorted(y / x for x, y in zip(xs, ys))
        med = ratios[len(ratios) // 2]
        ax.scatter(xs, ys, s=12, alpha=0.7, label=f"{shape} ({len(ps)} pairs, median {med:.2f}x)")
        lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
    ax.plot([lo, hi], [lo, hi], color="#555555", linewidth=1, linestyle="--", label="same time")
    span = (lo - (hi - lo) * 0.05, hi + (hi - lo) * 0.05)
    if hi > 8 * lo:
        ax.set_xscale("log")
        ax.set_yscale("log")
        span = (lo / 1.1, hi * 1.1)
    ax.set_xlim(*span)  # one range on both axes: the diagonal at 45 degrees
    ax.set_ylim(*span)
    ax.set_xlabel("without PDL (TP_PDL=0), us")
    ax.set_ylabel("with PDL (TP_PDL=1), us")
    ax.set_title(f"{g.label}: PDL against no PDL (below the line: PDL faster)")
    ax.legend(loc="upper left", fontsize=7)
    return _png(fig)


# ------------------------------------------------------------------ html

CSS = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1100px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; } h3 { font-size: 1.1em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #f0f0f0; } td.t { text-align: left; font-family: monospace; }
figure { margin: 0.5em 0 1.5em; } figcaption { font-size: 0.85em; color: #555; }
p.note { color: #8a4b00; } .meta { color: #555; font-size: 0.9em; }
"""

# Counts the figures the browser decoded and says so in the title and on the
# body, so a headless browser's DOM dump shows whether every image rendered.
SCRIPT = """
window.addEventListener("load", function () {
  var imgs = document.querySelectorAll("img[data-figure]"), n = 0;
  for (var i = 0; i < imgs.length; i++) if (imgs[i].complete && imgs[i].naturalWidth > 0) n++;
  document.body.setAttribute("data-rendered", String(n));
  document.title = "rendered " + n + " of " + imgs.length + " figures";
});
"""


def _fmt(v, spec=".2f", suffix=""):
    return "&mdash;" if v is None else f"{v:{spec}}{suffix}"


class _Page:
    """Collects the body's parts and counts the figures."""

    def __init__(self):
        self.parts: list[str] = []
        self.figures = 0

    def add(self, text: str):
        self.parts.append(text)

    def figure(self, png_b64: str, alt: str, caption: str):
        self.figures += 1
        self.add(
            f'<figure><img data-figure="{self.figures}" width="{int(FIG_W * FIG_DPI)}"'
            f' height="{int(FIG_H * FIG_DPI)}" alt="{html.escape(alt)}"'
            f' src="data:image/png;base64,{png_b64}">'
            f"<figcaption>{caption}</figcaption></figure>"
        )


def _table(g: OpGroup, dev: Device, base: str) -> str:
    rows = []
    for w in g.winners:
        strategy = f"{w.strategy} (the baseline)" if w.is_baseline else w.strategy
        rows.append(
            f'<tr data-shape="{html.escape(w.shape)}"><td class="t">{html.escape(w.shape)}</td>'
            f'<td class="t" title="{html.escape(w.params)}">{html.escape(strategy)}</td>'
            f"<td>{_fmt(w.us)}</td><td>{_fmt(w.baseline_us)}</td><td>{_fmt(w.speedup, '.2f', 'x')}</td>"
            f"<td>{_fmt(pct_ceiling(w, dev), '.0f', '%')}</td>"
            f'<td class="t">{html.escape(w.params)}</td></tr>'
        )
    return (
        '<table class="winners"><tr><th>shape</th><th>winner</th><th>&micro;s</th>'
        f"<th>{html.escape(base)} &micro;s</th><th>speedup</th><th>% of ceiling</th><th>params</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _op_section(page: _Page, dev: Device, g: OpGroup, shape: str | None):
    base = BASELINE_LABEL.get(g.op, DEFAULT_BASELINE_LABEL)
    page.add(f"<h3>{html.escape(g.label)}</h3>")
    page.add(_table(g, dev, base))
    if g.superseded:
        page.add(f'<p class="meta">{g.superseded} older winner(s) of the same shapes (other options or tuner version) are not shown.</p>')
    page.add(
        f"<p class=meta>Speedup = {html.escape(base)} time / winner time, both in graph replay; "
        "% of ceiling = bytes moved per call / time, against the device's measured streaming-read ceiling.</p>"
    )
    page.figure(plot_speedup(g, base), f"{g.label} speedup per shape", f"Speedup over {html.escape(base)} per shape; the dashed line is 1.0 (no gain).")
    if dev.read_gbps and any(pct_ceiling(w, dev) for w in g.winners):
        page.figure(
            plot_ceiling(g, dev, base),
            f"{g.label} percent of the read ceiling",
            f"Achieved bandwidth (bytes per call / time) as a percent of the read ceiling, {dev.read_gbps:.0f} GB/s, "
            "against the bytes moved per call: small calls are bound by launch latency, large ones by memory.",
        )
    else:
        page.add('<p class="note">No read ceiling measured for this device, or no winner with bytes and a time: no bandwidth plot.</p>')
    w = next((x for x in g.winners if x.shape == shape), None) if shape else None
    note = ""
    if w is None:
        w = default_shape(g)
        note = " (the shape with the most trials" + (f"; {html.escape(shape)} is not tuned for this op" if shape else "") + ")"
    timed = sum(1 for t in w.trials if _timed(t))
    if timed:
        states: dict[str, int] = {}
        for t in w.trials:
            if t.state != "ok":
                states[t.state] = states.get(t.state, 0) + 1
        failed = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none"
        page.figure(
            plot_distribution(g, w, base),
            f"{g.label} {w.shape} candidate times",
            f"Every timed candidate of {html.escape(w.shape)}{note}, one row per strategy (blue: without PDL, "
            f"orange: with); solid line: the winner, dashed: {html.escape(base)}. "
            f"{len(w.trials)} trials; not timed: {html.escape(failed)}.",
        )
    else:
        page.add(f'<p class="note">{html.escape(w.shape)}{note}: no timed candidates in the trials table.</p>')
    pairs = {x.shape: p for x in g.winners if (p := pdl_pairs(x.trials))}
    if pairs:
        page.figure(
            plot_pdl(g, pairs),
            f"{g.label} PDL against no PDL",
            "Candidates whose parameters differ only in TP_PDL: the time with programmatic dependent launch "
            "against the time without, per shape. A TP_PDL=1 time assumes the kernel before it lets it start early.",
        )
    else:
        page.add(f'<p class="note">{html.escape(g.label)}: this cache has no PDL pairs (timed candidates that differ only in TP_PDL).</p>')


def render(groups: list[DeviceGroup], path: str, shape: str | None = None) -> tuple[str, int]:
    """The HTML page and its number of figures."""
    page = _Page()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page.add(f"<h1>Autotune report</h1><p class=meta>Cache <code>{html.escape(os.path.abspath(path))}</code>, made {when}.</p>")
    for dg in groups:
        d = dg.device
        page.add(f"<h2>{html.escape(d.label)}</h2>")
        if d.read_gbps:
            page.add(
                f"<p class=meta>Read ceiling {_fmt(d.read_gbps, '.0f')} GB/s, copy {_fmt(d.copy_gbps, '.0f')} GB/s, "
                f"empty kernel {_fmt(d.empty_us)} us; L2 {d.l2_bytes / 2**20:.0f} MiB; measured {html.escape(d.measured_at)}.</p>"
            )
        else:
            page.add('<p class="note">No device row with measured ceilings for this GPU.</p>')
        for g in dg.ops:
            _op_section(page, d, g, shape)
    doc = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="atk-figures" content="{page.figures}">'
        f"<title>Autotune report</title><style>{CSS}</style><script>{SCRIPT}</script></head>\n<body>\n"
        + "\n".join(page.parts)
        + "\n</body></html>\n"
    )
    return doc, page.figures


def write_atomic(out: str, text: str):
    """Writes `text` to `out` through a temporary file in the same folder."""
    folder = os.path.dirname(os.path.abspath(out))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".atk-report-", suffix=".html", dir=folder)
    except OSError as e:
        raise ReportError(f"{out}: cannot write: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600: as open() would instead
        os.replace(tmp, out)
    except OSError as e:
        os.unlink(tmp)
        raise ReportError(f"{out}: cannot write: {e.strerror}") from None


# ------------------------------------------------------------------- cli


def add_arguments(p: argparse.ArgumentParser):
    """The `report` subcommand's options (atk.__main__ builds the parser)."""
    p.add_argument("--db", metavar="FILE", default=None,
                   help="the autotune cache (default: $XDG_CACHE_HOME/autotune/tune.db, else ~/.cache/autotune/tune.db); opened read-only")
    p.add_argument("-o", "--output", metavar="FILE", default="report.html",
                   help="the HTML page to write (default: report.html); one self-contained file")
    p.add_argument("--device", metavar="NAME", default=None,
                   help='only this GPU, as the devices table names it (e.g. "NVIDIA H200"; case-insensitive)')
    p.add_argument("--shape", metavar="SHAPE", default=None,
                   help="the shape whose candidate times are plotted (MxKxN or TxH, e.g. 1x2048x8192); "
                   "default: per op, the shape with the most trials")


DESCRIPTION = """\
Write an HTML report of an autotune cache: per GPU and op, a table of the
winners (shape, strategy, time, baseline time, speedup, percent of the read
ceiling) and four plots: speedup per shape, percent of the read ceiling
against bytes moved, the candidates' times for one shape with the winner and
the baseline marked, and PDL against no PDL for candidates that differ only in
TP_PDL. Images are embedded; the page needs nothing else. Needs matplotlib."""

EPILOG = """\
examples:
  python -m atk report -o report.html
  python -m atk report --db bench/tune.db --device "NVIDIA H200" --shape 1x2048x8192

exit status: 0 written; 2 bad input (missing file, not an autotune cache, no
winners, unknown --device or --shape): nothing is written."""


def run(args: argparse.Namespace) -> int:
    """Runs the subcommand; errors go to stderr as `atk report: error: ...` (status 2)."""
    db = args.db or default_db_path()
    try:
        groups = select(load(db), db, args.device, args.shape)
        try:
            import matplotlib  # noqa: F401  (checked before any drawing)
        except ImportError:
            raise ReportError("matplotlib is not installed (pip install matplotlib); no report written") from None
        text, n = render(groups, db, args.shape)
        write_atomic(args.output, text)
    except ReportError as e:
        print(f"atk report: error: {e}", file=sys.stderr)
        return 2
    ops = sum(len(g.ops) for g in groups)
    print(f"wrote {args.output}: {len(groups)} device(s), {ops} op(s), {n} figure(s) from {db}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`atk report` on its own (tests call this with an argv list)."""
    p = argparse.ArgumentParser(prog="python -m atk report", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return run(p.parse_args(argv))
