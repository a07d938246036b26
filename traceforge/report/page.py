"""The report as one self-contained HTML page, drawn with Bokeh (its JavaScript inlined, so
the page makes no network request). Each plot comes with where to find the same thing in
Perfetto: the track ``traceforge annotate`` writes, and times in ms from the trace start, as
Perfetto's timeline shows them.

Bokeh was chosen by measurement (docs/report.md): the same ten plots make a 1.4 MB page that
renders in ~1 s with pan, zoom and hover; Plotly's inlined library alone is 4.8 MB (a 5.0 MB
page, 2.2 s); hand-drawn SVG is smallest (0.4 MB, 0.1 s) but has no zoom into a time series.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from ..analyses.cross_trace.stragglers import (
    MIN_RANKS_FOR_STRAGGLERS,
    STRAGGLER_FIGURES,
    STRAGGLER_SHARE,
    stragglers,
)
from ..analyses.gpu_time.classify import NON_GPU
from ..analyses.roofline.tables import RooflineTables
from ..errors import UsageError
from ..util.lazy_pandas import pd
from ..util.short_names import shorten_distinct
from .collect import RankReport, Series
from .headline import headline, step_table

EXTRA = "report"
WIDTH = 1000
HEIGHT = 280
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
STRAGGLER_COLOR, RANK_COLOR = "#d62728", "#1f77b4"
BAR_NAME = 80  # a bar's name cut to this (in the middle, different names kept different)


def require_bokeh() -> Any:
    try:
        import bokeh.embed  # noqa: F401
        import bokeh.layouts  # noqa: F401
        import bokeh.models  # noqa: F401
        import bokeh.plotting  # noqa: F401
        import bokeh.resources  # noqa: F401
    except ImportError:
        raise UsageError(f"report needs Bokeh: pip install 'traceforge[{EXTRA}]'") from None
    import bokeh

    return bokeh


def render(ranks: list[RankReport], title: str = "traceforge report") -> str:
    """The page's HTML for the ranks' reports (rank order)."""
    bokeh = require_bokeh()
    blocks: list[Any] = [_div(f"<h1>{html.escape(title)}</h1><p>{len(ranks)} rank(s): "
                              + ", ".join(f"rank {r.rank} <code>{html.escape(r.path)}</code>" for r in ranks)
                              + ". To see the tracks named below, run <code>traceforge annotate TRACE --all</code> "
                              "and <code>traceforge open</code> the .annotated file; times are ms from the trace "
                              "start, as Perfetto's timeline shows them.</p>")]
    if len(ranks) > 1:
        blocks += _comparison(ranks)
    for r in ranks:
        blocks += _rank_section(r)
    layout = bokeh.layouts.column(*blocks)
    return bokeh.embed.file_html(layout, bokeh.resources.INLINE, title)


def _div(text: str) -> Any:
    from bokeh.models import Div

    return Div(text=text, width=WIDTH)


def _plot_block(title: str, perfetto: str, fig: Any | None, empty: str) -> list[Any]:
    """A plot's heading, its Perfetto hint and the plot (or why there is none)."""
    head = _div(f"<h3>{html.escape(title)}</h3><p><b>In Perfetto:</b> {perfetto}</p>")
    if fig is None:
        return [head, _div(f"<p><i>{html.escape(empty)}</i></p>")]
    fig.name = "plot"
    return [head, fig]


def _figure(**kwargs: Any) -> Any:
    from bokeh.plotting import figure

    kwargs.setdefault("tools", "pan,xwheel_zoom,box_zoom,reset,hover,save")
    kwargs.setdefault("height", HEIGHT)
    return figure(width=WIDTH, **kwargs)


def _ms(ns: Any) -> Any:
    return np.asarray(ns, dtype=np.int64) / 1e6


def _comparison(ranks: list[RankReport]) -> list[Any]:
    from bokeh.models import ColumnDataSource

    table = pd.DataFrame([{"rank": r.rank, "path": r.path, **r.figures} for r in ranks], dtype=object)
    found = stragglers(table)
    blocks = [_div(f"<h2>Across {len(ranks)} ranks</h2><p>A straggler is a rank whose GPU busy time or median "
                   f"step time is more than {STRAGGLER_SHARE:.0%} from the median rank's (red; "
                   f"{MIN_RANKS_FOR_STRAGGLERS} ranks or more). Found: "
                   + (html.escape("; ".join(f"rank {s['rank']} {STRAGGLER_FIGURES[s['figure']]} "
                                            f"{s['deviation']:+.0%}" for s in found)) or "none") + "</p>")]
    for key, label in STRAGGLER_FIGURES.items():
        if key not in table or table[key].isna().all():
            continue
        slow = {s["rank"] for s in found if s["figure"] == key}
        known = table[table[key].notna()]
        names = [str(r) for r in known["rank"]]
        source = ColumnDataSource({"rank": names, "ms": _ms(known[key].astype("int64")).tolist(),
                                   "color": [STRAGGLER_COLOR if int(r) in slow else RANK_COLOR for r in known["rank"]]})
        fig = _figure(x_range=names, title=f"{label} per rank (ms)", tooltips=[("rank", "@rank"), ("ms", "@ms")])
        fig.vbar(x="rank", top="ms", width=0.8, color="color", source=source)
        hint = ("each rank's GPU process (its <i>stream N</i> threads); GPU busy is the union of its GPU ops"
                if key == "gpu_busy_ns" else "the <i>ProfilerStep#N</i> slices on each rank's CPU thread")
        blocks += _plot_block(f"{label} per rank", hint, fig, "")
    return blocks


def _rank_section(r: RankReport) -> list[Any]:
    steps_text = ", ".join(f"{html.escape(n)} at {(ts - r.start_ns) / 1e6:,.3f} ms"
                           for n, ts in zip(r.steps["name"], r.steps["ts"].tolist()))
    h = headline(r)
    reasons = "".join(f"<li>{html.escape(t)}</li>" for t in h.reasons)
    blocks = [_div(f"<h2>Rank {r.rank}</h2><div class='headline'><p><b>{html.escape(h.step)}; "
                   f"{html.escape(h.busy)}.</b></p><p>Why, the largest first:</p><ol>{reasons}</ol></div>"
                   f"<p><code>{html.escape(r.path)}</code>. Profiler steps: {steps_text or 'none'}.</p>")]
    blocks.append(_div("<h3>Step time</h3>" + _html_table(step_table(r), "step-table")))
    blocks += _critical_section(r)
    blocks += _plot_block("Temporal breakdown per step (ms)",
                          "each step is the <i>ProfilerStep#N</i> slice on the CPU thread; its GPU ops are on the "
                          "GPU process's <i>stream N</i> threads (<code>annotate --idle-gaps</code> draws the idle "
                          "time as <i>Idle gaps (stream N)</i>)", _temporal(r), "no GPU ops")
    blocks += _plot_block("Kernel categories by non-overlapped time (ms)",
                          "<code>annotate --classify</code>: counter tracks <i>GPU N CATEGORY busy</i> in the GPU "
                          "process, and a category arg on every GPU op", _categories(r), "no GPU ops")
    blocks += _plot_block("Top kernels by total time (ms)",
                          "search the kernel's name (Ctrl+F in the timeline) on the GPU process's "
                          "<i>stream N</i> threads", _top_kernels(r), "no kernels")
    blocks += _plot_block("Queue length over time", "<code>annotate --queue-length</code>: counter track "
                          "<i>Queue length stream N</i> in the GPU process", _lines(r, r.queue, "queued ops"),
                          "no GPU ops launched on a stream")
    copies = [s for s in r.memcpy if "memset" not in s.label.lower()]
    sets = [s for s in r.memcpy if "memset" in s.label.lower()]
    blocks += _plot_block("Memcpy bandwidth over time (GB/s)", "<code>annotate --memcpy-bw</code>: counter "
                          "tracks <i>Memcpy KIND GB/s</i> in the GPU process (memsets apart, below: their rates "
                          "would hide the copies')", _lines(r, copies, "GB/s"), "no copies")
    if sets:
        blocks += _plot_block("Memset bandwidth over time (GB/s)", "<code>annotate --memcpy-bw</code>: counter "
                              "track <i>Memset GB/s</i> in the GPU process", _lines(r, sets, "GB/s"), "")
    blocks += _plot_block("Launch delay distribution", "<code>annotate --launch-delay</code>: counter track "
                          "<i>Launch delay (us)</i> in the GPU process, and launch_delay_us on each GPU op",
                          _delays(r), "no GPU op joins a launch call")
    blocks += _plot_block("Frequent kernel sequences (GPU ms)", "<code>annotate --patterns</code>: slices on "
                          "<i>Patterns (stream N)</i> in the GPU process", _patterns(r), "no repeated sequence")
    if len(r.overlap) and int(r.overlap["comm_ns"].sum()):
        blocks += _plot_block("Communication overlap per step (ms)", "<code>annotate --exposed-comm</code>: slices on "
                              "<i>Exposed communication</i> in the GPU process", _overlap(r), "")
    if r.roofline is not None:
        blocks += _roofline_blocks(r.roofline)
    if r.memory:
        blocks += _plot_block("Memory over time (MB)", "<code>annotate --memory</code>: counter tracks "
                              "<i>Memory allocated MB</i> and <i>Memory reserved MB</i> in the GPU (or host) process",
                              _lines(r, r.memory, "MB", scale=1e6), "")
    return blocks


def _html_table(df: pd.DataFrame, css: str) -> str:
    """A small table as HTML: numbers with three decimals (a missing one as -)."""
    def cell(v: Any) -> str:
        if isinstance(v, (float, np.floating)):
            return "-" if np.isnan(v) else f"{v:,.3f}"
        return html.escape(str(v))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>"
                   for row in df.itertuples(index=False))
    return f"<table class='{css}' border='1' cellpadding='3'><tr>{head}</tr>{body}</table>"


def _critical_section(r: RankReport) -> list[Any]:
    """Per step, the share of its span each kind of work bounds on the critical path."""
    head = ("<h3>Critical path per step</h3><p><b>In Perfetto:</b> <code>annotate --critical-path</code>: the "
            "<i>Critical path</i> track, a slice per segment named by what bounds it, arrows along the path; "
            "<code>traceforge critical-path TRACE --table segments</code> lists them.</p>")
    c = r.critical
    if c is None or not len(c):
        return [_div(head + "<p><i>no profiler steps: no critical path</i></p>")]
    span = c["span_ns"].where(c["span_ns"] > 0, 1)
    table = pd.DataFrame({"step": c["label"], "span ms": c["span_ns"] / 1e6, "length ms": c["length_ns"] / 1e6,
                          **{f"{k[:-3]} %": 100 * c[k] / span for k in r.critical_categories}})
    return [_div(head + _html_table(table, "critical-table"))]


def _outside_legend(fig: Any) -> None:
    """The legend right of the plot, not over its data; a click hides a series."""
    if fig.legend:
        legend = fig.legend[0]
        legend.click_policy = "hide"
        fig.add_layout(legend, "right")


def _step_label(step: int) -> str:
    return "all" if step < 0 else str(step)


def _temporal(r: RankReport) -> Any | None:
    t = r.temporal
    per_step = t[t["step"] >= 0]  # the whole trace's row is in the step table: as a bar it squashes the steps
    t = per_step if len(per_step) else t
    if not len(t):
        return None
    parts = ["idle_ns", "compute_ns", "non_compute_ns"]
    data = {"step": [_step_label(s) for s in t["step"]], **{p: _ms(t[p]).tolist() for p in parts}}
    fig = _figure(x_range=data["step"], tooltips=[("step", "@step"), ("ms", "@$name")])
    fig.vbar_stack(parts, x="step", width=0.8, color=PALETTE[:3], source=data,
                   legend_label=["idle", "compute", "non-compute"])
    _outside_legend(fig)
    return fig


def _hbar(names: list[str], values: Any, extra: dict[str, list] | None = None) -> Any:
    from bokeh.models import ColumnDataSource

    names = shorten_distinct(names, BAR_NAME)
    labels = [f"{i + 1}. {n}" for i, n in enumerate(names)][::-1]
    source = ColumnDataSource({"name": labels, "ms": _ms(values).tolist()[::-1],
                               **{k: v[::-1] for k, v in (extra or {}).items()}})
    fig = _figure(y_range=labels, height=max(HEIGHT, 22 * len(labels) + 60),
                  tooltips=[("", "@name"), ("ms", "@ms")] + [(k, f"@{k}") for k in (extra or {})])
    fig.hbar(y="name", right="ms", height=0.7, source=source, color=PALETTE[0])
    return fig


def _categories(r: RankReport) -> Any | None:
    c = r.categories
    c = c[c["category"] != NON_GPU] if len(c) else c  # time without GPU work is not a kernel category
    if not len(c):
        return None
    names = [f"GPU {d} {cat}" for d, cat in zip(c["device"], c["category"])]
    return _hbar(names, c["nonoverlapped_ns"], {"instances": c["instances"].tolist()})


def _top_kernels(r: RankReport) -> Any | None:
    k = r.top_kernels
    if not len(k):
        return None
    return _hbar(list(k["name"]), k["total_ns"].astype("int64"), {"count": k["count"].tolist()})


def _patterns(r: RankReport) -> Any | None:
    p = r.patterns
    if not len(p):
        return None
    names = [f"{k} (x{n})" for k, n in zip(p["kernels"], p["count"])]
    return _hbar(names, p["gpu_ns"], {"length": p["length"].tolist()})


def _lines(r: RankReport, series: list[Series], unit: str, scale: float = 1.0) -> Any | None:
    if not series:
        return None
    fig = _figure(x_axis_label="ms from the trace start", y_axis_label=unit,
                  tooltips=[("", "$name"), ("ms", "$x{0,0.000}"), (unit, "$y{0,0.[000]}")])
    for i, s in enumerate(series):
        fig.step(_ms(s.ts - r.start_ns), np.asarray(s.values, dtype=np.float64) / scale, mode="after",
                 color=PALETTE[i % len(PALETTE)], legend_label=s.label, name=s.label)
    _outside_legend(fig)
    return fig


def _delays(r: RankReport) -> Any | None:
    if not len(r.delay_counts):
        return None
    from bokeh.models import ColumnDataSource

    edges_us = r.delay_edges_ns / 1e3
    source = ColumnDataSource({"left": edges_us[:-1].tolist(), "right": edges_us[1:].tolist(),
                               "count": r.delay_counts.tolist()})
    below = f"; {r.delay_below:,} at or under {edges_us[0]:,.3f} µs in the first bar" if r.delay_below else ""
    fig = _figure(x_axis_type="log", x_axis_label=f"launch delay (µs, log scale{below})",
                  y_axis_label="GPU ops", tooltips=[("µs", "@left{0,0.0} - @right{0,0.0}"), ("GPU ops", "@count")])
    fig.quad(left="left", right="right", bottom=0, top="count", source=source, color=PALETTE[1])
    return fig


def _overlap(r: RankReport) -> Any | None:
    o = r.overlap
    data = {"step": [_step_label(s) for s in o["step"]], "overlapped_ns": _ms(o["overlapped_ns"]).tolist(),
            "exposed_ns": _ms(o["exposed_ns"]).tolist()}
    fig = _figure(x_range=data["step"], tooltips=[("step", "@step"), ("ms", "@$name")])
    fig.vbar_stack(["overlapped_ns", "exposed_ns"], x="step", width=0.8, color=[PALETTE[2], PALETTE[3]],
                   source=data, legend_label=["overlapped with compute", "exposed"])
    _outside_legend(fig)
    return fig


ROOFLINE_TOP = 15  # op groups in the time-lost plot
INTENSITY_RANGE = (1e-3, 1e4)  # FLOP/byte: the roofs are drawn across it


def _roofline_blocks(t: RooflineTables) -> list[Any]:
    """One roofline chart per GPU model the rank ran on, and the ops that lost the most time."""
    hint = ("<code>annotate --roofline</code>: args flops, bytes, tflops, gbps, intensity, bound and roofline_pct "
            "on each modelled kernel, and counter tracks <i>Roofline TFLOP/s</i>, <i>Roofline GB/s</i>, "
            "<i>Roofline %</i> in the GPU process")
    note = f"coverage {t.coverage_pct:.1f}% of kernel time" + "".join(f"; {n}" for n in t.notes)
    blocks = []
    models = {lim.name: lim for lim in t.limits.values()}
    for name, limits in sorted(models.items()) or [("", None)]:
        title = f"Roofline on {name} (log-log; {note})" if name else f"Roofline ({note})"
        blocks += _plot_block(title, hint, _roofline_chart(t, limits), "no op with both FLOPs and bytes, or the "
                              "GPU's limits are unknown (--gpu-limits)")
    lost = t.ops[t.ops["lost_ns"].notna()].head(ROOFLINE_TOP)
    fig = None
    if len(lost):
        names = [f"{op} {shapes}" for op, shapes in zip(lost["op"], lost["shapes"])]
        fig = _hbar(names, lost["lost_ns"].astype("int64"), {"pct_of_roofline": lost["roofline_pct"].round(1).tolist(),
                                                             "bound": lost["bound"].tolist()})
    blocks += _plot_block("Top ops by time lost to the roofline (ms)", hint, fig, "no roofline (no shapes or an "
                          "unknown GPU)")
    return blocks


def _roofline_chart(t: RooflineTables, limits: Any) -> Any | None:
    """Achieved TFLOP/s against intensity per op group (name + shapes + dtype; circle area by its
    time), with the memory roof and each compute roof the ops run against."""
    from bokeh.models import ColumnDataSource

    ops = t.ops[(t.ops["intensity"] > 0) & (t.ops["tflops"] > 0)]
    if limits is None or not len(ops):
        return None
    fig = _figure(x_axis_type="log", y_axis_type="log", height=420, x_axis_label="FLOP / byte",
                  y_axis_label="TFLOP/s", tooltips=[("op", "@op"), ("shapes", "@shapes"), ("dtype", "@dtype"),
                                                    ("ms", "@ms"), ("% of roofline", "@pct")])
    bw = float(limits.memory_gbps) / 1e3  # TB/s: TFLOP/s at 1 FLOP/byte
    x = np.geomspace(*INTENSITY_RANGE, 200)
    for i, (unit, peak) in enumerate(sorted(limits.peaks.items(), key=lambda kv: -kv[1])):
        fig.line(x, np.minimum(float(peak), bw * x), color=PALETTE[i % len(PALETTE)], legend_label=unit, line_width=2)
    size = 6 + 30 * np.sqrt(ops["time_ns"].to_numpy(np.float64) / max(float(ops["time_ns"].max()), 1.0))
    source = ColumnDataSource({"intensity": ops["intensity"].tolist(), "tflops": ops["tflops"].tolist(),
                               "size": size.tolist(), "op": ops["op"].tolist(), "shapes": ops["shapes"].tolist(),
                               "dtype": ops["dtype"].tolist(), "ms": _ms(ops["time_ns"]).tolist(),
                               "pct": ops["roofline_pct"].round(1).fillna(-1).tolist()})
    fig.scatter("intensity", "tflops", size="size", source=source, alpha=0.5, color=PALETTE[3])
    fig.legend.location = "bottom_right"
    return fig
