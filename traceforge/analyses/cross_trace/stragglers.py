"""Stragglers across ranks: ranks whose figure is far from the median rank's.

In a synchronous job every rank waits for the slowest, so one rank that computes more, or
steps slower, holds all of them back. A straggler is a rank whose GPU busy time (the union of
its GPU ops, per device, summed) or step time (its median ``ProfilerStep#`` CPU range) is more
than ``STRAGGLER_SHARE`` (10 %) from the median rank's (``np.median`` over the ranks that have
the figure); with fewer than ``MIN_RANKS_FOR_STRAGGLERS`` (3) ranks no rank is singled out
(with 2, each is as far from the median as the other).
"""

from __future__ import annotations

import numpy as np

from ...columns.scan import TraceColumns
from ...util.distinct import unique
from ...util.lazy_pandas import pd
from ...util.union import union_ns

Figures = dict[str, int | float | str]

STRAGGLER_SHARE = 0.10
MIN_RANKS_FOR_STRAGGLERS = 3
STRAGGLER_FIGURES = {"gpu_busy_ns": "GPU busy", "step_ns": "step time"}


def gpu_figures(cols: TraceColumns) -> Figures:
    """GPU ops, GPU busy time, GPU span and, where the trace has profiler steps, the median step time."""
    gpu = cols.gpu
    figures: Figures = {"gpu_ops": len(gpu)}
    if len(gpu):
        busy, last = 0, None
        for device in unique(gpu.device).tolist():  # one device's temporaries at a time
            rows = np.flatnonzero(gpu.device == device)
            ts = gpu.ts[rows]
            end = ts + np.maximum(gpu.dur[rows], 0)
            del rows
            busy += union_ns(ts, end)
            last = int(end.max()) if last is None else max(last, int(end.max()))
        figures["gpu_busy_ns"] = busy
        figures["gpu_span_ns"] = last - int(gpu.ts.min())
    if len(cols.steps):
        figures["step_ns"] = _lower_median(cols.steps.dur)
    return figures


def _lower_median(values: np.ndarray) -> int:
    """An observed value (exact ns): the lower of the two middle ones for an even count."""
    return int(np.sort(values)[(len(values) - 1) // 2])


def stragglers(table: pd.DataFrame) -> list[dict]:
    """The stragglers of ``table`` (one row per rank: ``rank``, ``path`` and the figures of
    ``STRAGGLER_FIGURES`` it has, integer ns or None): one dict per (rank, figure) found, with
    ``value``, ``median`` and ``deviation`` (signed share of the median)."""
    if len(table) < MIN_RANKS_FOR_STRAGGLERS:
        return []
    found = []
    for key in STRAGGLER_FIGURES:
        if key not in table:
            continue
        known = table[table[key].notna()]
        if len(known) < MIN_RANKS_FOR_STRAGGLERS:
            continue
        values = known[key].astype("int64").to_numpy()
        median = float(np.median(values))
        for (rank, path), value in zip(known[["rank", "path"]].itertuples(index=False), values.tolist()):
            deviation = (value - median) / median if median else 0.0
            if abs(deviation) > STRAGGLER_SHARE:
                found.append({"rank": int(rank), "path": path, "figure": key, "value": value, "median": median,
                              "deviation": deviation})
    return found
