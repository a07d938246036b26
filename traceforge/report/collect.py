"""What the report shows of one rank, taken from a loaded ``Trace`` through the Python API.

Everything is small: tables of a few rows per step, kernel or category, and series cut to
``downsample.min_max_buckets`` (peaks kept). Times are integer ns; ``start_ns`` is the trace
start (``TraceColumns.trace_start_ns``: Perfetto's time 0), so a time shown as ``ts - start_ns``
is where Perfetto's timeline shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analyses.launch_delay import launch_pairs
from ..analyses.roofline.tables import RooflineTables
from ..analyses.stats import top_kernels
from ..analyses.stragglers import Figures, gpu_figures
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
    step_table = pd.DataFrame({"name": [cols.names[n] for n in steps.name.tolist()],
                               "ts": steps.ts.astype(np.int64), "dur": steps.dur.astype(np.int64)})
    lo, hi = _time_span(cols)
    _, _, delays = launch_pairs(cols)  # the delays alone: no call stack to read back
    edges, counts = delay_histogram(delays.astype(np.int64))
    return RankReport(
        rank=rank, path=path, start_ns=start, figures=gpu_figures(cols), steps=step_table,
        temporal=stats.temporal, overlap=stats.overlap,
        top_kernels=top_kernels(cols).head(TOP_KERNELS).assign(rank=rank),
        categories=trace.classify(), patterns=trace.patterns().head(TOP_PATTERNS),
        delay_edges_ns=edges, delay_counts=counts,
        queue=_series(trace.queue_length(), ["device", "stream"], "queue_length", "GPU {} stream {}", lo, hi, buckets),
        memcpy=_series(trace.memcpy_bandwidth(), ["device", "kind"], "gbps", "GPU {} {}", lo, hi, buckets),
        memory=_memory_series(trace.table("memory"), lo, hi, buckets),
        roofline=trace.roofline(),
    )


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
        where = "host" if device_type == 0 else f"GPU {device}"
        for column in ("allocated", "reserved"):
            ts, values = min_max_buckets(group["ts"].to_numpy(np.int64), group[column].to_numpy(np.int64),
                                         buckets=buckets, lo=lo, hi=hi)
            out.append(Series(f"{where} {column}", ts, values))
    return out


def delay_histogram(delays_ns: np.ndarray, bins: int = DELAY_BINS) -> tuple[np.ndarray, np.ndarray]:
    """Launch delays in ``bins`` log-spaced bins from 1 µs to the largest delay (integer ns
    edges); delays under 1 µs (and negative ones) count in the first bin. Empty for none."""
    if not len(delays_ns):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    top = max(int(delays_ns.max()), 2_000)
    edges = unique(np.round(np.geomspace(1_000, top + 1, bins + 1)).astype(np.int64))
    edges[0] = min(int(delays_ns.min()), 1_000)
    edges[-1] = max(edges[-1], top + 1)
    at = np.searchsorted(edges, delays_ns, side="right") - 1
    return edges, np.bincount(at, minlength=len(edges) - 1)[: len(edges) - 1]
