"""What the report says first about a rank: why its step takes the time it does.

``headline`` gives the step time, how busy the GPU is, and the top reasons in order of the time
they account for (GPU idle time, the category of kernels taking most GPU time, what bounds the
critical path, whether launches queue behind the GPU or the launch itself is slow);
``step_table`` the per-step numbers the plots draw. Both read a ``RankReport`` only, so they
are tested without Bokeh.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analyses.gpu_time.classify import NON_GPU
from ..util.lazy_pandas import pd
from .collect import RankReport

TOP_REASONS = 3
QUEUED_SHARE = 0.5  # past this share of the launch delay spent queued, launches wait on the GPU


@dataclass(frozen=True)
class Headline:
    step: str  # "median step 30.898 ms over 4 steps (ProfilerStep#2 .. #5)"
    busy: str  # "GPU busy 88.4% of its span (118.405 of 133.870 ms)"
    reasons: list[str]  # the largest first


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


def headline(r: RankReport) -> Headline:
    steps = r.steps
    if len(steps):
        median = int(np.sort(steps["dur"].to_numpy())[(len(steps) - 1) // 2])
        step = (f"median step {_ms(median)} over {len(steps)} step(s) ({steps['name'].iloc[0]} .. "
                f"{steps['name'].iloc[-1]})")
    else:
        step = "no ProfilerStep#N ranges: no step time"
    busy_ns, span_ns = r.figures.get("gpu_busy_ns"), r.figures.get("gpu_span_ns")
    busy = (f"GPU busy {100 * busy_ns / span_ns:.1f}% of its span ({_ms(busy_ns)} of {_ms(span_ns)})"
            if busy_ns is not None and span_ns else "no GPU ops")
    reasons: list[tuple[float, str]] = []
    whole = r.temporal[r.temporal["step"] < 0] if len(r.temporal) else r.temporal
    if len(whole):
        w = whole.iloc[0]
        reasons.append((float(w["idle_pct"]), f"the GPU is idle {w['idle_pct']:.1f}% of its span "
                        f"({_ms(int(w['idle_ns']))}): see the temporal breakdown and the critical path"))
        reasons.append((float(w["non_compute_pct"]), f"copies and memsets take {w['non_compute_pct']:.1f}% "
                        f"({_ms(int(w['non_compute_ns']))})"))
    gpu = r.categories[r.categories["category"] != NON_GPU] if len(r.categories) else r.categories
    if len(gpu) and span_ns:
        top = gpu.sort_values("nonoverlapped_ns", ascending=False, kind="stable").iloc[0]
        share = 100 * int(top["nonoverlapped_ns"]) / span_ns
        reasons.append((share, f"{top['category']} kernels take {share:.1f}% of the GPU span "
                        f"({_ms(int(top['nonoverlapped_ns']))}, {int(top['instances']):,} ops)"))
    if r.critical is not None and len(r.critical):
        spans = r.critical["span_ns"].to_numpy().sum()
        shares = {c[:-3]: r.critical[c].to_numpy().sum() / spans for c in r.critical_categories} if spans else {}
        if shares:
            name, share = max(shares.items(), key=lambda kv: kv[1])
            reasons.append((100 * share, f"the critical path is {100 * share:.1f}% {name} (summed over the steps)"))
    reasons.sort(key=lambda t: -t[0])
    shown = [text for _, text in reasons[:TOP_REASONS]]
    if r.delay_ns:  # how to read the launch delays, always
        queued = r.queue_wait_ns / r.delay_ns
        shown.append(f"launches wait {100 * queued:.0f}% of their delay behind earlier GPU work: the CPU runs ahead "
                     "of the GPU (not a launch problem)" if queued >= QUEUED_SHARE else
                     f"launch overhead is {100 * (1 - queued):.0f}% of the launch delay: the GPU waits on the CPU's "
                     "launches")
    return Headline(step, busy, shown)


def step_table(r: RankReport) -> pd.DataFrame:
    """Per profiler step: its CPU range (ms), and the GPU's span, idle, compute and non-compute
    time in it (ms, from the temporal breakdown; the whole trace as step ``all``)."""
    t = r.temporal
    cpu = dict(zip(r.steps["step"].tolist(), r.steps["dur"].tolist())) if "step" in r.steps else {}
    rows = []
    for s in t.itertuples(index=False):
        rows.append({"step": "all" if s.step < 0 else str(s.step),
                     "CPU step ms": cpu.get(int(s.step), np.nan) / 1e6 if s.step >= 0 else np.nan,
                     "GPU span ms": s.span_ns / 1e6, "idle ms": s.idle_ns / 1e6, "compute ms": s.compute_ns / 1e6,
                     "non-compute ms": s.non_compute_ns / 1e6, "idle %": s.idle_pct})
    return pd.DataFrame(rows, columns=["step", "CPU step ms", "GPU span ms", "idle ms", "compute ms",
                                       "non-compute ms", "idle %"])
