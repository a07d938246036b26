"""Classification results as a text table, CSV, JSON, or a self-contained HTML bar chart.

The HTML report draws one stacked bar per (input, GPU) side by side, as vLLM's tool does,
as inline SVG: it opens in a browser with no network and no JavaScript. Each segment is
a ``<rect class="seg">`` with ``data-input``/``data-device``/``data-category``/``data-ns``
and a tooltip, and a table under the chart gives the same numbers.
"""

from __future__ import annotations

import io
from html import escape
from pathlib import Path

from ..api.results import NON_GPU, Classified, kernel_labels
from ..util.lazy_pandas import pd
from ..util.short_names import shorten
from .output import WIDTH, json_text

# Distinct hues for the first categories (a preset's order), then lighter ones; non-GPU is grey.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#2b2d7e", "#bcbd22", "#e7298a", "#3d3d3d", "#8dd3c7", "#fdb462", "#80b1d3",
           "#b3de69", "#fccde5", "#bc80bd", "#ccebc5")
NON_GPU_COLOR = "#d9d9d9"


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.3f}"


def _rows(results: list[Classified], kernels: bool) -> pd.DataFrame:
    frames = [(r.kernels if kernels else r.table).assign(file=r.path) for r in results]
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return df[["file"] + [c for c in df.columns if c != "file"]] if len(df.columns) else df


def render_csv(results: list[Classified], kernels: bool = False) -> str:
    out = io.StringIO()
    _rows(results, kernels).to_csv(out, index=False)
    return out.getvalue()


def render_json(results: list[Classified], kernels: bool = False) -> str:
    files = []
    for r in results:
        df = r.kernels if kernels else r.table
        files.append({"file": r.path, "rules": r.rules.name, "span_ns": r.span_ns, "window_ns": r.window_ns,
                      "rows": df.to_dict(orient="records")})
    return json_text({"files": files})


def render_text(results: list[Classified], kernels: bool = False) -> str:
    lines: list[str] = []
    for r in results:
        lines.append(f"== {r.path} (rules: {r.rules.name}) ==")
        if not len(r.table):
            lines.append("no GPU kernels, copies or memsets in this file")
            continue
        if r.elapsed_given:
            lines.append(f"window: elapsed time given, {_ms(r.window_ns)} ms (GPU span {_ms(r.span_ns)} ms)")
        else:
            lines.append(f"window: GPU span (first GPU op start to last GPU op end), {_ms(r.window_ns)} ms")
        has_stage = "stage" in r.table.columns
        for device, g in (r.kernels if kernels else r.table).groupby("device", sort=True):
            busy = int(r.table[(r.table.device == device) & (r.table.category != NON_GPU)].nonoverlapped_ns.sum())
            lines.append(f"GPU {device}: busy {_ms(busy)} ms ({100 * busy / max(r.window_ns, 1):.1f}%)")
            cat, ops_w, ms_w, nonov = (14, 7, 10, "non-ovl ms") if kernels else (20, 9, 12, "non-overlapped ms")
            head = f"  {'category':<{cat}}" + (f" {'stage':<10}" if has_stage else "")
            head += f" {'ops':>{ops_w}} {'summed ms':>{ms_w}} {nonov:>{len(nonov) + 1}} {'share':>7}"
            rows = []
            for row in g.itertuples(index=False):
                ops = f"{row.instances:,}" if row.category != NON_GPU else "-"
                summed = _ms(row.duration_ns) if row.category != NON_GPU else "-"
                line = f"  {row.category:<{cat}}" + (f" {row.stage:<10}" if has_stage else "")
                rows.append(line + f" {ops:>{ops_w}} {summed:>{ms_w}} {_ms(row.nonoverlapped_ns):>{len(nonov) + 1}} "
                            f"{100 * row.share:>6.1f}%")
            if kernels:  # the name in the room left, cut so that different names stay different
                room = max(MIN_NAME, WIDTH - 2 - max(map(len, rows + [head])))
                labels = kernel_labels(g.name.astype(str).tolist(), room)
                rows = [f"{line}  {labels[name]}" for line, name in zip(rows, g.name.astype(str).tolist())]
            lines.append(head + ("  name" if kernels else ""))
            lines += rows
    return "\n".join(lines) + "\n"


MIN_NAME = 30


def _short(name: str, width: int = 100) -> str:
    return shorten(name, width)


def render_html(results: list[Classified], title: str = "GPU time by kernel category") -> str:
    """A standalone HTML page: the stacked bar chart (inline SVG) and the numbers as a table."""
    bars = [(r, int(device)) for r in results for device in sorted(set(r.table.device.tolist()))]
    categories = list(dict.fromkeys(c for r in results for c in r.rules.categories))
    present = {c for r in results for c in r.table.category.tolist()}
    stack = [c for c in categories if c in present] + [NON_GPU]
    colors = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(categories)}
    colors[NON_GPU] = NON_GPU_COLOR
    svg = _svg(bars, stack, colors, title)
    rules = ", ".join(dict.fromkeys(r.rules.name for r in results))
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{escape(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
        "table{border-collapse:collapse;margin-top:16px;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th:first-child,td:first-child{text-align:left}"
        "</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p>Non-overlapped GPU time per category (each instant counted once, given to the op that started "
        f"first), and non-GPU time up to the window (GPU span, or the elapsed time given). Rules: "
        f"{escape(rules)}.</p>",
        svg, _table(bars, stack), "</body></html>", ""])


def _bar_label(r: Classified, device: int) -> str:
    return f"{Path(r.path).name} GPU {device}"


def _value(r: Classified, device: int, category: str) -> int:
    t = r.table
    return int(t[(t.device == device) & (t.category == category)].nonoverlapped_ns.sum())


def _svg(bars: list[tuple[Classified, int]], stack: list[str], colors: dict[str, str], title: str) -> str:
    bar_w, gap, left, top, plot_h, bottom = 70, 50, 90, 20, 380, 70
    legend_w = 220
    width = left + max(len(bars), 1) * (bar_w + gap) + legend_w
    height = top + plot_h + bottom
    top_ns = max([r.window_ns for r, _ in bars] + [1])
    step = _nice_step(top_ns / 5)
    scale = plot_h / (-(-top_ns // step) * step)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" font-size="12">']
    tick = 0
    while tick * scale <= plot_h + 0.5:
        y = top + plot_h - tick * scale
        out.append(f'<line x1="{left - 5}" y1="{y:.1f}" x2="{width - legend_w}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{_ms(tick).rstrip("0").rstrip(".")}</text>')
        tick += step
    out.append(f'<text x="16" y="{top + plot_h / 2:.1f}" transform="rotate(-90 16 {top + plot_h / 2:.1f})" '
               f'text-anchor="middle">ms</text>')
    for i, (r, device) in enumerate(bars):
        x = left + gap / 2 + i * (bar_w + gap)
        y = top + plot_h
        label = _bar_label(r, device)
        for category in stack:
            ns = _value(r, device, category)
            if ns <= 0:
                continue
            h = ns * scale
            y -= h
            share = 100 * ns / max(r.window_ns, 1)
            out.append(f'<rect class="seg" x="{x:.1f}" y="{y:.2f}" width="{bar_w}" height="{h:.2f}" '
                       f'fill="{colors[category]}" data-input="{escape(r.path)}" data-device="{device}" '
                       f'data-category="{escape(category)}" data-ns="{ns}">'
                       f'<title>{escape(label)}: {escape(category)} {_ms(ns)} ms ({share:.1f}%)</title></rect>')
            if h >= 14:
                out.append(f'<text x="{x + bar_w / 2:.1f}" y="{y + h / 2 + 4:.1f}" text-anchor="middle" '
                           f'font-size="10" fill="{_ink(colors[category])}">{share:.0f}%</text>')
        out.append(f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h + 18}" text-anchor="middle">'
                   f'{escape(_short(Path(r.path).name, 18))}</text>')
        out.append(f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h + 34}" text-anchor="middle">GPU {device}</text>')
    lx = width - legend_w + 20
    for j, category in enumerate(reversed(stack)):
        ly = top + j * 20
        out.append(f'<rect class="legend" x="{lx}" y="{ly}" width="12" height="12" fill="{colors[category]}"/>')
        out.append(f'<text x="{lx + 18}" y="{ly + 10}">{escape(category)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _ink(fill: str) -> str:
    """Black or white text, whichever reads better on ``fill`` (``#rrggbb``)."""
    r, g, b = (int(fill[i:i + 2], 16) for i in (1, 3, 5))
    return "#000" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"


def _nice_step(raw: float) -> int:
    """A round axis step (1, 2 or 5 times a power of ten ns) not below ``raw``."""
    step = 1
    while True:
        for m in (1, 2, 5):
            if step * m >= raw:
                return step * m
        step *= 10


def _table(bars: list[tuple[Classified, int]], stack: list[str]) -> str:
    head = "".join(f"<th>{escape(_bar_label(r, d))}</th>" for r, d in bars)
    rows = [f"<table><tr><th>category (ms)</th>{head}</tr>"]
    for category in stack:
        cells = "".join(f"<td>{_ms(_value(r, d, category))}</td>" for r, d in bars)
        rows.append(f"<tr><td>{escape(category)}</td>{cells}</tr>")
    total = "".join(f"<td>{_ms(r.window_ns)}</td>" for r, _ in bars)
    rows.append(f"<tr><th>total</th>{total}</tr></table>")
    return "\n".join(rows)
