"""What the report shows of one rank, taken from a loaded ``Trace`` through the Python API.

Everything is small: tables of a few rows per step, kernel or category, and series cut to
``downsample.min_max_buckets`` (peaks kept). Times are integer ns; ``start_ns`` is the trace
start (``TraceColumns.trace_start_ns``: Perfetto's time 0), so a time shown as ``ts - start_ns``
is where Perfetto's timeline shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analyses.critical_path.path import CATEGORY_COLUMNS
from ..analyses.cross_trace.stats import top_kernels
from ..analyses.cross_trace.stragglers import Figures, gpu_figures
from ..analyses.launches.delay import launch_pairs, queue_wait
from ..analyses.roofline.tables import RooflineTables
from ..analyses.structure.steps import STEP_NAME
from ..api.trace import Trace
from ..util.distinct import unique
from ..util.lazy_pandas import pd
from .downsample import DEFAULT_BUCKETS, min_max_buckets

STATS_TABLES = ("temporal", "overlap")
TOP_KERNELS = 15
TOP_PATTERNS = 10
DELAY_BINS = 40


@dataclass
class Series:
    """One step series (ts ns absolute, values) under a label, e.g. ``GPU 0 stream 7``."""

    label: str
    ts: np.ndarray
    values: np.ndarray


@dataclass
class RankReport:
    rank: int
    path: str
    start_ns: int
    figures: Figures
    steps: pd.DataFrame  # step, name, ts (ns), dur (ns): the ProfilerStep# ranges
    temporal: pd.DataFrame
    overlap: pd.DataFrame
    top_kernels: pd.DataFrame
    categories: pd.DataFrame
    patterns: pd.DataFrame
    delay_edges_ns: np.ndarray  # histogram of launch delays: bin edges (ns) and counts
    delay_counts: np.ndarray
    delay_below: int = 0  # delays under the first bin's left edge, counted in it
    delay_ns: int = 0  # launch delays (the positive part) summed, and how much of it is queueing
    queue_wait_ns: int = 0
    critical: pd.DataFrame | None = None  # the critical path's summary per step (None where it failed)
    critical_categories: tuple[str, ...] = ()
    queue: list[Series] = field(default_factory=list)
    memcpy: list[Series] = field(default_factory=list)
    memory: list[Series] = field(default_factory=list)
    roofline: RooflineTables | None = None


def rank_report(rank: int, path: str, trace: Trace, *, buckets: int = DEFAULT_BUCKETS) -> RankReport:
    """The report's data for one rank's ``trace``."""
    cols = trace.columns
    start = cols.trace_start_ns if cols.trace_start_ns is not None else 0
    stats = trace.stats(tables=STATS_TABLES, rank=rank)
    steps = cols.steps
    names = [cols.names[n] for n in steps.name.tolist()]
    step_table = pd.DataFrame({"step": [int(m.group(1)) if (m := STEP_NAME.fullmatch(n)) else -1 for n in names],
                               "name": names, "ts": steps.ts.astype(np.int64), "dur": steps.dur.astype(np.int64)})
    step_table = step_table.sort_values("ts", kind="stable").reset_index(drop=True)
    lo, hi = _time_span(cols)
    gpu_rows, launch_rows, delays = launch_pairs(cols)  # the delays alone: no call stack to read back
    wait = queue_wait(cols, gpu_rows, launch_rows, delays)
    edges, counts = delay_histogram(delays.astype(np.int64))
    critical = _critical(trace)
    return RankReport(
        rank=rank, path=path, start_ns=start, figures=gpu_figures(cols), steps=step_table,
        temporal=stats.temporal, overlap=stats.overlap,
        top_kernels=top_kernels(cols, TOP_KERNELS).assign(rank=rank),
        categories=trace.classify(), patterns=trace.patterns().head(TOP_PATTERNS),
        delay_edges_ns=edges, delay_counts=counts,
        delay_below=delays_below(delays, edges), delay_ns=int(np.maximum(delays, 0).sum()), queue_wait_ns=int(wait.sum()),
        critical=critical, critical_categories=CATEGORY_COLUMNS,
        queue=_series(trace.queue_length(), ["device", "stream"], "queue_length", "GPU {} stream {}", lo, hi, buckets),
        memcpy=_series(trace.memcpy_bandwidth(), ["device", "kind"], "gbps", "GPU {} {}", lo, hi, buckets),
        memory=_memory_series(trace.table("memory"), lo, hi, buckets),
        roofline=trace.roofline(),
    )


def _critical(trace: Trace) -> pd.DataFrame | None:
    """The critical path's summary per profiler step; None for a trace without steps (or where
    the path cannot be made: the report still shows the rest)."""
    if not len(trace.columns.steps):
        return None
    try:
        return trace.critical_path(segments=False).summary
    except Exception:  # the report's other sections stand without it
        return None


def _time_span(cols) -> tuple[int, int]:
    span = cols.time_span()
    return span if span else (0, 1)


def _series(df: pd.DataFrame, keys: list[str], value: str, label: str, lo: int, hi: int,
            buckets: int) -> list[Series]:
    out = []
    for key, group in df.groupby(keys, sort=True):
        ts, values = min_max_buckets(group["ts"].to_numpy(np.int64), group[value].to_numpy(), buckets=buckets,
                                     lo=lo, hi=hi)
        out.append(Series(label.format(*key), ts, values))
    return out


def _memory_series(df: pd.DataFrame, lo: int, hi: int, buckets: int) -> list[Series]:
    """Allocated and reserved bytes per device, each series cut separately."""
    out = []
    for (device_type, device), group in df.groupby(["device_type", "device"], sort=True):
        where = "CPU" if device_type == "cpu" or device < 0 else f"GPU {device}"  # (device_type_name's)
        for column in ("allocated", "reserved"):
            ts, values = min_max_buckets(group["ts"].to_numpy(np.int64), group[column].to_numpy(np.int64),
                                         buckets=buckets, lo=lo, hi=hi)
            out.append(Series(f"{where} {column}", ts, values))
    return out


def delay_histogram(delays_ns: np.ndarray, bins: int = DELAY_BINS) -> tuple[np.ndarray, np.ndarray]:
    """Launch delays in ``bins`` log-spaced bins (integer ns edges) from the 1st percentile of
    the positive delays (at least 1 ns) to the largest: every bin as wide on the log axis, none
    spanning decades below the data. Delays under the first edge (and those <= 0: the clocks
    overlap) count in the first bin (``delays_below``). Empty for none."""
    if not len(delays_ns):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    positive = delays_ns[delays_ns > 0]
    low = max(int(np.percentile(positive, 1)) if len(positive) else 1, 1)
    top = max(int(delays_ns.max()), 2 * low)
    edges = unique(np.round(np.geomspace(low, top + 1, bins + 1)).astype(np.int64))
    edges[-1] = max(edges[-1], top + 1)
    at = np.clip(np.searchsorted(edges, delays_ns, side="right") - 1, 0, len(edges) - 2)
    return edges, np.bincount(at, minlength=len(edges) - 1)[: len(edges) - 1]


def delays_below(delays_ns: np.ndarray, edges: np.ndarray) -> int:
    """How many delays are under the histogram's first edge (counted in its first bin)."""
    return int(np.count_nonzero(delays_ns < edges[0])) if len(edges) else 0
