"""Idle intervals: the distribution of each stream's idle gaps, per idle category.

A gap is the time between two consecutive merged busy intervals of a (device, stream), and
its category (host wait, kernel wait, other) is the one ``gpu_busy.stream_gaps`` gives it:
the same gaps and categories as the ``streams`` table's idle breakdown, with the same
``kernel_wait_ns`` threshold. The time before a stream's first op and after its last is not a
gap (as in HTA's ``show_idle_interval_stats``).

Per (device, stream, category) with at least one gap: count, total, mean, min, p50, p90 and
max of the gap lengths, in exact ns. Percentiles are nearest-rank: the p-th percentile of n
gaps is the ``ceil(p * n / 100)``-th smallest, so it is always the length of a real gap, an
integer ns (pandas' ``describe``, which HTA prints, interpolates between two gaps instead).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...columns.names import names_at
from ...columns.scan import TraceColumns
from ...util.lazy_pandas import pd
from ...util.percentiles import nearest_rank
from .busy import IDLE_CATEGORIES, KERNEL_WAIT_NS, concatenated, launched_before, stream_gaps, stream_pieces

PERCENTILES = (50, 90)
COLUMNS = ["device", "stream", "category", "count", "total_ns", "mean_ns", "min_ns",
           *[f"p{p}_ns" for p in PERCENTILES], "max_ns"]
DEFAULT_MIN_GAP_NS = 10_000  # the idle-gap track's default: gaps shorter than 10 µs are not drawn
GAP_COLUMNS = ["device", "stream", "category", "start_ns", "end_ns", "dur_ns", "next_op"]


def idle_intervals(cols: TraceColumns, *, kernel_wait_ns: int = KERNEL_WAIT_NS,
                   launched_before_ns: int | None = None) -> pd.DataFrame:
    """One row per (device, stream, category) with gaps: count, total_ns, mean_ns (float),
    min_ns, p50_ns, p90_ns, max_ns (exact ns); by device, stream, then categories in the order
    of ``IDLE_CATEGORIES``. ``launched_before_ns`` keeps only the GPU ops whose launch call
    started before it, as HTA does with the start of the last profiler step
    (``launches.last_step_start``)."""
    if launched_before_ns is not None:
        cols = launched_before(cols, launched_before_ns)
    rows = []
    for g in stream_gaps(cols, kernel_wait_ns=kernel_wait_ns):
        gaps = g.gaps
        order = np.lexsort((gaps, g.category))
        gaps, category = gaps[order], g.category[order]
        bounds = np.searchsorted(category, np.arange(len(IDLE_CATEGORIES) + 1))
        for code, name in enumerate(IDLE_CATEGORIES):
            mine = gaps[bounds[code]:bounds[code + 1]]
            if not len(mine):
                continue
            total = int(mine.sum())
            row = {"device": g.device, "stream": g.stream, "category": name, "count": len(mine),
                   "total_ns": total, "mean_ns": total / len(mine), "min_ns": int(mine[0])}
            row.update({f"p{p}_ns": nearest_rank(mine, p) for p in PERCENTILES})
            row["max_ns"] = int(mine[-1])
            rows.append(row)
    out = pd.DataFrame(rows, columns=COLUMNS)
    int_columns = [c for c in COLUMNS if c.endswith("_ns") and c != "mean_ns"] + ["count", "stream"]
    return out.astype({c: np.int64 for c in int_columns})


def long_gaps(cols: TraceColumns, *, min_gap_ns: int = DEFAULT_MIN_GAP_NS, kernel_wait_ns: int = KERNEL_WAIT_NS,
              chunk: int | None = None) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per (device, stream) with such gaps: (device, stream, start, end, category code, row of the
    GPU op that ends the gap), for the idle gaps of at least ``min_gap_ns``. The short gaps are
    dropped a piece of the stream at a time (``stream_pieces``), never held all at once."""
    for device, stream, _, pieces in stream_pieces(cols, kernel_wait_ns=kernel_wait_ns, chunk=chunk):
        kept = []
        for _, _, start, end, code, opener in pieces:
            keep = end - start >= min_gap_ns
            if keep.any():
                kept.append((start[keep], end[keep], code[keep], opener[keep]))
            del start, end, code, opener, keep
        if kept:
            yield device, stream, *concatenated(kept, ())


def idle_gaps(cols: TraceColumns, *, min_gap_ns: int = DEFAULT_MIN_GAP_NS, kernel_wait_ns: int = KERNEL_WAIT_NS
              ) -> pd.DataFrame:
    """One row per idle gap of at least ``min_gap_ns`` (``long_gaps``): device, stream, category,
    start_ns, end_ns, dur_ns, and next_op, the name of the GPU op that ends it."""
    parts = list(long_gaps(cols, min_gap_ns=min_gap_ns, kernel_wait_ns=kernel_wait_ns))
    start = np.concatenate([p[2] for p in parts] or [np.zeros(0, np.int64)]).astype(np.int64)
    end = np.concatenate([p[3] for p in parts] or [np.zeros(0, np.int64)]).astype(np.int64)
    code = np.concatenate([p[4] for p in parts] or [np.zeros(0, np.int8)])
    opener = np.concatenate([p[5] for p in parts] or [np.zeros(0, np.int64)])
    sizes = [len(p[2]) for p in parts]
    return pd.DataFrame({
        "device": np.repeat(np.array([p[0] for p in parts], np.int64), sizes),
        "stream": np.repeat(np.array([p[1] for p in parts], np.int64), sizes),
        "category": np.asarray(IDLE_CATEGORIES, dtype=object)[code],
        "start_ns": start, "end_ns": end, "dur_ns": end - start,
        "next_op": names_at(cols.names, cols.gpu.name[opener]) if len(opener) else np.zeros(0, object),
    }, columns=GAP_COLUMNS)
