"""Summary statistics of a rank: what users otherwise compute by hand from per-kind CSVs.

All times are integer ns; a negative ``dur`` counts as 0. Tables (one row set per rank):

- ``summary``: wall span (first event start to last event end over every scanned event),
  event counts, and the launch-overlap totals (``launch_overlap``).
- ``devices`` / ``streams``: GPU busy (union of op intervals) and idle time, with HTA's
  idle breakdown per stream (``gpu_busy``).
- ``activity``: time share per CUPTI activity kind (``activity.CUPTI_KINDS``: kernel,
  gpu_memcpy, gpu_memset, cuda_runtime, cuda_driver): the kind's summed durations over the
  sum of those kinds' durations (so shares add up to 100 %), what a notebook computes.
  ``activity_all`` (asked for only): the same over every scanned kind, CPU ops, user
  annotations and profiler ranges included. Nested events (CPU ops inside CPU ops, kernels
  under a profiler step) each count in full, as in a sum over a per-kind CSV.
- ``tails``: per kind, how concentrated time is in the longest events: for p in 1, 5, 10,
  the top ``max(1, floor(count * p / 100))`` events by duration, their share of the kind's
  time and their mean.
- ``top_kernels``: per kernel name: count, total, mean, min, max, sample std (HTA's kernel
  breakdown, exact totals), share of all kernel time.
- ``launch_apis``: per launch API (runtime or driver): calls, time, GPU ops and kernels it
  launched; ``launch_kernels``: which GPU ops each API launched (e.g. the kernels that go
  through ``cudaLaunchKernelExC``).
- ``launch_overlaps``: the overlapping consecutive launch pairs.

Those are the core tables, made together. The other tables are the features' (``Table.make`` of
``annotator.plugin``: overlap, temporal, kernel types, idle intervals, queue, memcpy, memory, ...),
each made only when asked for (``trace_stats(extra=..., tables=...)``) from the columns with the
launch calls that GPU ops join in memory, and a ``StatsContext``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from ...columns.scan import KERNEL, TraceColumns
from ...columns.table import Table, merged_by_ordinal
from ...errors import UsageError
from ...io.memory.heap import give_back
from ...io.read.rank_files import metadata_rank
from ...util.distinct import factorized
from ...util.lazy_pandas import pd
from ..gpu_time.busy import KERNEL_WAIT_NS, busy_idle
from ..hta.choices import hta_version, hta_view
from ..launches.calls import join_gpu_to_launch
from ..launches.overlap import launch_overlaps
from ..structure.activity import CUPTI_KINDS, GPU_ACTIVITY, cat_kinds, durations_by_kind
from ..structure.filters import trace_start
from ..structure.stacks import joined_calls
from ..structure.steps import Steps, gpu_steps, profiler_steps

TAIL_PERCENTS = (1, 5, 10)


class StatsContext:
    """What the tables beside the core ones share: the options (``kernel_wait_ns``, ``hta``: a version
    or None, and ``options``: their features' options, defaults filled in), the wall span, the steps
    (made once, when first read)."""

    def __init__(self, cols: TraceColumns, span: tuple[int, int], kernel_wait_ns: int, hta: str | None = None,
                 options: Mapping[str, Any] | None = None):
        self.cols, self.span, self.kernel_wait_ns, self.hta = cols, span, kernel_wait_ns, hta
        self.options = dict(options or {})

    @cached_property
    def steps(self) -> Steps:
        return profiler_steps(self.cols)

    @cached_property
    def gpu_step(self) -> np.ndarray:
        """The step of each GPU op (``steps.gpu_steps``)."""
        return gpu_steps(self.cols, self.steps)


Maker = Callable[[TraceColumns, StatsContext], "pd.DataFrame"]  # one table of a rank, from the context


def _empty() -> pd.DataFrame:
    return pd.DataFrame({"rank": np.zeros(0, np.int64)})


class TraceStats:
    """One DataFrame per table, by name, each with a ``rank`` column first (empty if not made):
    ``stats.top_kernels``, ``stats.tables()``. The names and their order are the declared tables'
    (``annotator.registry.STATS_TABLES``)."""

    def __init__(self, tables: Mapping[str, pd.DataFrame]):
        self._tables = dict(tables)

    def __getattr__(self, name: str) -> pd.DataFrame:
        tables = self.__dict__.get("_tables", {})
        if name not in tables:
            raise AttributeError(f"no stats table named {name!r} (there are {', '.join(tables)})")
        return tables[name]

    def __getstate__(self) -> dict:
        return self.__dict__

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TraceStats) and self._tables.keys() == other._tables.keys() and all(
            a.equals(other._tables[name]) for name, a in self._tables.items())

    def tables(self) -> dict[str, pd.DataFrame]:
        return dict(self._tables)

    def names(self) -> tuple[str, ...]:
        return tuple(self._tables)

    @classmethod
    def of_ranks(cls, parts: list[TraceStats]) -> TraceStats:
        """Several ranks' statistics as one: each table's rows, rank after rank."""
        if len(parts) == 1:
            return parts[0]
        return cls({name: pd.concat([p.tables()[name] for p in parts], ignore_index=True)
                    for name in parts[0].tables()})


def rank_of(cols: TraceColumns) -> int | None:
    """``distributedInfo.rank`` from the trace's top-level metadata, if it is there."""
    return metadata_rank(cols.metadata)


def wall_span(cols: TraceColumns) -> tuple[int, int]:
    """(first start, last end) in ns over every scanned event; (0, 0) for none."""
    return cols.time_span() or (0, 0)


CORE_TABLES = ("summary", "devices", "streams", "activity", "tails", "top_kernels", "launch_apis",
               "launch_kernels", "launch_overlaps")
TOTALS_TABLES = ("activity_all",)  # made from every event's duration, as the core tables, only when asked for


def trace_stats(cols: TraceColumns, *, rank: int = 0, kernel_wait_ns: int = KERNEL_WAIT_NS,
                tables: Collection[str] | None = None, hta: bool | str = False,
                extra: Mapping[str, Maker] | None = None, names: Sequence[str] | None = None,
                options: Mapping[str, Any] | None = None) -> TraceStats:
    """The ``tables`` (default the core tables) for one trace (one rank), of ``names`` (default the
    core tables, ``activity_all`` and ``extra``'s, in that order); the others are empty. ``extra``: the
    makers of the tables beside the core ones (the declared tables' ``make``: ``annotator.registry``),
    given a ``StatsContext`` with ``options``. Launch calls and CPU ops may be on disk (``scan``'s ``spill_launch``,
    ``spill_cpu_ops``): they are read once for the totals, then only the launch calls a GPU op
    joins come back. ``hta``: HTA's choices (``hta_choices``; True: the latest version's, or a
    version of ``HTA_VERSIONS``): the tables after the totals
    (activity, tails, launch API calls) read HTA's view of the trace, the queue HTA's launch
    APIs, the kernel breakdown HTA's ``duration_ratio``."""
    extra = extra or {}
    names = tuple(names or (*CORE_TABLES, *TOTALS_TABLES, *extra))
    wanted = CORE_TABLES if tables is None else tuple(tables)
    unknown = [t for t in wanted if t not in names]
    if unknown:
        raise UsageError(f"tables: no table {unknown[0]!r} (there are {', '.join(names)})")
    span = wall_span(cols)
    totals = _Totals.of(cols) if set(wanted) & {*CORE_TABLES, *TOTALS_TABLES} else None
    cols = _joined_launches(cols)
    hta = hta_version(hta)
    if hta:
        cols = hta_view(cols)
    # Each step's temporaries (~100 B a GPU op) leave holes in the heap that the next does not fit.
    give_back()
    made = _core_tables(cols, span, kernel_wait_ns, totals) if set(wanted) & set(CORE_TABLES) else {}
    if "activity_all" in wanted:
        made["activity_all"] = totals.activity_all
    context = StatsContext(cols, span, kernel_wait_ns, hta, options)
    for name in wanted:
        if name in extra:
            made[name] = extra[name](cols, context)
            give_back()
    out = {}
    for name in names:
        df = made[name] if name in wanted else _empty()
        if "rank" not in df.columns:
            df.insert(0, "rank", np.full(len(df), rank, np.int64))
        out[name] = df
    return TraceStats(out)


@dataclass
class _Totals:
    """What the core tables read of every launch call and CPU op (on disk, maybe), before only
    the launch calls GPU ops join are read back."""

    activity: pd.DataFrame
    tails: pd.DataFrame
    per_api: _PerApi
    launches: int
    cpu_ops: int
    activity_all: pd.DataFrame

    @classmethod
    def of(cls, cols: TraceColumns) -> _Totals:
        per_kind = durations_by_kind(cols)
        return cls(activity_shares(per_kind, CUPTI_KINDS), tails(per_kind), _per_api(cols),
                   sum(map(len, cols.all_launches)), sum(map(len, cols.all_cpu_ops)), activity_shares(per_kind))


def _core_tables(cols: TraceColumns, span: tuple[int, int], kernel_wait_ns: int, totals: _Totals
                 ) -> dict[str, pd.DataFrame]:
    devices, streams = busy_idle(cols, span, kernel_wait_ns=kernel_wait_ns)
    pairs, overlaps = launch_overlaps(cols)
    give_back()
    apis, api_kernels = launch_apis(cols, totals.per_api)
    summary = pd.DataFrame([{
        "trace": cols.path, "trace_start": _start(cols, span), "span_start": span[0], "span_end": span[1], "span_ns": span[1] - span[0],
        "gpu_ops": len(cols.gpu), "kernels": int(np.count_nonzero(cols.gpu.kind == KERNEL)),
        "launches": totals.launches, "cpu_ops": totals.cpu_ops, "devices": len(devices),
        "streams": len(streams),
        "launch_pairs": pairs, "overlapping_launch_pairs": len(overlaps),
        "overlapping_launch_pct": 100.0 * len(overlaps) / pairs if pairs else 0.0,
    }])
    return {
        "summary": summary, "devices": devices, "streams": streams, "activity": totals.activity,
        "tails": totals.tails, "top_kernels": top_kernels(cols), "launch_apis": apis,
        "launch_kernels": api_kernels, "launch_overlaps": overlaps,
    }


def _start(cols: TraceColumns, span: tuple[int, int]) -> int:
    """The trace start in ns (Perfetto's time 0: ``filters.trace_start``), else the span's start."""
    start = trace_start(cols)
    return span[0] if start is None else start


def activity_shares(per_kind: list[tuple[str, np.ndarray]], kinds: Collection[str] | None = None) -> pd.DataFrame:
    """kind, events, total_ns, share_pct (of the summed durations of the kinds shown), from
    ``durations_by_kind``: of ``kinds`` only (in ``durations_by_kind``'s order), or every kind."""
    if kinds is not None:
        per_kind = [(k, d) for k, d in per_kind if k in kinds]
    totals = [int(d.sum()) for _, d in per_kind]
    grand = sum(totals)
    return pd.DataFrame({
        "kind": [k for k, _ in per_kind],
        "events": np.array([len(d) for _, d in per_kind], np.int64),
        "total_ns": np.array(totals, np.int64),
        "share_pct": [100.0 * t / grand if grand else 0.0 for t in totals],
    })


def tails(per_kind: list[tuple[str, np.ndarray]]) -> pd.DataFrame:
    """Per kind (``durations_by_kind``): count, total, mean, max, min, and top 1/5/10 % events'
    count, share and mean."""
    rows = []
    for kind, dur in per_kind:
        total = int(dur.sum(dtype=np.int64))
        row = {"kind": kind, "count": len(dur), "total_ns": total, "mean_ns": total / len(dur),
               "max_ns": int(dur.max()), "min_ns": int(dur.min())}
        tops = _top_sums(dur, [max(1, len(dur) * p // 100) for p in TAIL_PERCENTS])
        for p, top in zip(TAIL_PERCENTS, tops):
            n = max(1, len(dur) * p // 100)
            row[f"top{p}_n"] = n
            row[f"top{p}_pct"] = 100.0 * top / total if total else 0.0
            row[f"top{p}_mean_ns"] = top / n
        rows.append(row)
    columns = ["kind", "count", "total_ns", "mean_ns", "max_ns", "min_ns"] + [
        f"top{p}_{c}" for p in TAIL_PERCENTS for c in ("n", "pct", "mean_ns")]
    return pd.DataFrame(rows, columns=columns)


def _top_sums(values: np.ndarray, counts: list[int]) -> list[int]:
    """The sum of the ``n`` largest of ``values``, for each ``n`` of ``counts`` (each at least 1,
    at most ``len(values)``): partitions of one copy, not a sort and a running sum (an int64 each)."""
    largest = max(counts)
    top = np.partition(values, len(values) - largest)[len(values) - largest:]  # the ``largest`` largest
    sums = {}
    for n in sorted(set(counts), reverse=True):  # each from the part the last left, largest first
        top = np.partition(top, len(top) - n)[len(top) - n:]
        sums[n] = int(top.sum(dtype=np.int64))
    return [sums[n] for n in counts]


def top_kernels(cols: TraceColumns) -> pd.DataFrame:
    """Per kernel name, by total time: count, total_ns, mean_ns, min_ns, max_ns, std_ns, pct."""
    gpu = cols.gpu
    rows = np.flatnonzero(gpu.kind == KERNEL)
    df = pd.DataFrame({"name": gpu.name[rows], "dur": np.maximum(gpu.dur[rows], 0)})
    g = df.groupby("name", sort=False)["dur"]
    out = pd.DataFrame({
        "count": g.size(), "total_ns": g.sum(), "min_ns": g.min(), "max_ns": g.max(), "std_ns": g.std().fillna(0.0),
    })
    out.insert(2, "mean_ns", out["total_ns"] / out["count"])
    total = int(out["total_ns"].sum())
    out["pct"] = 100.0 * out["total_ns"] / total if total else 0.0
    out = out.reset_index()
    out["name"] = np.asarray(cols.names, dtype=object)[out["name"].to_numpy()] if len(out) else []
    # ties by name text, not by where a name first appears: a trimmed trace gives the same order
    return out.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)


def launch_apis(cols: TraceColumns, per_api: _PerApi | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per launch API: kind, calls, total_ns, max_ns, gpu_ops, kernels;
    per (API, GPU op name): kind, count, total_ns of the GPU ops). ``per_api``: the calls'
    totals, when ``cols.launches`` holds only the calls GPU ops join."""
    launches, gpu = cols.launches, cols.gpu
    names = np.asarray(cols.names, dtype=object)
    gpu_rows, launch_rows = join_gpu_to_launch(cols, np.arange(len(launches)))
    apis = (per_api or _per_api(cols)).table(launches, launch_rows, gpu.kind[gpu_rows] == KERNEL)
    apis["api"] = names[apis["api"].to_numpy()] if len(apis) else []
    apis["kind"] = cat_kinds(cols)[apis["kind"].to_numpy()] if len(apis) else []

    per_kernel = _per_api_kernel(launches.name[launch_rows], gpu.name[gpu_rows], gpu.kind[gpu_rows],
                                 np.maximum(gpu.dur[gpu_rows], 0), len(names))
    if len(per_kernel):
        per_kernel["api"] = names[per_kernel["api"].to_numpy()]
        per_kernel["kernel"] = names[per_kernel["kernel"].to_numpy()]
        per_kernel["kind"] = per_kernel["kind"].map(GPU_ACTIVITY)
    per_kernel = per_kernel.sort_values(["api", "count", "total_ns", "kernel", "kind"],
                                        ascending=[True, False, False, True, True], kind="stable")
    return apis, per_kernel.reset_index(drop=True)


def _per_api_kernel(api: np.ndarray, kernel: np.ndarray, kind: np.ndarray, dur: np.ndarray, n_names: int
                    ) -> pd.DataFrame:
    """api, kernel, kind (ids), count and total_ns (exact) per distinct (api, kernel, kind), as
    first met: a pandas groupby of a big trace's millions of pairs held far more while it ran."""
    codes, first = factorized((api.astype(np.int64) * n_names + kernel) * 4 + kind)  # kind: 0-2
    count = np.bincount(codes, minlength=len(first))
    by_group = np.argsort(codes, kind="stable")
    total = np.add.reduceat(dur[by_group].astype(np.int64), np.cumsum(count) - count) if len(codes) else count
    return pd.DataFrame({"api": api[first], "kernel": kernel[first], "kind": kind[first], "count": count,
                         "total_ns": total})


class _PerApi:
    """Per (launch API, category) id pair, as first met: calls, total and longest ns."""

    def __init__(self, keys: np.ndarray, calls: np.ndarray, total: np.ndarray, longest: np.ndarray):
        self.keys, self.calls, self.total, self.longest = keys, calls, total, longest

    def table(self, launches: Table, launch_rows: np.ndarray, is_kernel: np.ndarray) -> pd.DataFrame:
        """With gpu_ops and kernels per pair (``launch_rows``: the call of each joined GPU op in
        ``launches``; ``is_kernel``: which are kernels); most calls first, then most time."""
        order = np.argsort(self.keys)
        group = order[np.searchsorted(self.keys[order], _api_keys(launches)[launch_rows])]
        table = pd.DataFrame({
            "api": self.keys >> 32, "kind": self.keys & 0xFFFFFFFF, "calls": self.calls, "total_ns": self.total,
            "max_ns": self.longest, "gpu_ops": np.bincount(group, minlength=len(self.keys)),
            "kernels": np.bincount(group[is_kernel], minlength=len(self.keys)),
        })
        return table.iloc[np.lexsort((-self.total, -self.calls))].reset_index(drop=True)


def _api_keys(launches: Table) -> np.ndarray:
    return launches.name.astype(np.int64) << 32 | launches.cat.astype(np.int64)


def _per_api(cols: TraceColumns) -> _PerApi:
    """Every launch call's totals, a chunk at a time, with numpy (a pandas groupby of millions
    of runtime calls held several times their columns at once)."""
    keys, calls, total, longest = [], [], [], []
    for part in cols.all_launches:
        for chunk in part.chunks():
            chunk_keys = _api_keys(chunk)
            group, first = factorized(chunk_keys)
            dur = np.maximum(chunk.dur, 0).astype(np.int64)
            keys.append(chunk_keys[first])
            calls.append(np.bincount(group, minlength=len(first)))
            total.append(np.zeros(len(first), np.int64))
            np.add.at(total[-1], group, dur)
            longest.append(np.zeros(len(first), np.int64))
            np.maximum.at(longest[-1], group, dur)
    if not keys:
        return _PerApi(*(np.zeros(0, np.int64) for _ in range(4)))
    group, first = factorized(np.concatenate(keys))  # the chunks' pairs, as first met in the trace
    out = [np.zeros(len(first), np.int64) for _ in range(3)]
    np.add.at(out[0], group, np.concatenate(calls))
    np.add.at(out[1], group, np.concatenate(total))
    np.maximum.at(out[2], group, np.concatenate(longest))
    return _PerApi(np.concatenate(keys)[first], *out)


def _joined_launches(cols: TraceColumns) -> TraceColumns:
    """``cols`` with the spilled launch calls that a GPU op joins (on correlation) read back."""
    if cols.spilled_launches is None:
        return cols
    joined = cols.spilled_launches.select(joined_calls(cols))
    return replace(cols, launches=merged_by_ordinal(cols.launches, joined), spilled_launches=None)
