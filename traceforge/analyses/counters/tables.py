"""The counters report: per-kernel rows with operator stacks and derived metrics, per-operator sums.

``kernels`` columns: ``source`` (``cupti_range`` or ``ncu``), ``source_index`` (range
number or ncu ID), ``kernel`` (name as the source wrote it), ``status`` (how the pairing
was checked), ``device``, ``stream``, ``event`` (ordinal of the trace event that gets the
args: the kernel, else the launch call; -1 none), ``event_kind``, ``trace_kernel`` (the
trace's name for that kernel, "" without kernel events), ``kernel_ts_ns`` /
``kernel_dur_ns`` (the trace's kernel; -1 when the trace has none), ``launch_ts_ns``,
``time_ns`` (the duration rates divide by: ``kernel_dur_ns`` with a trace, ncu's exact
``gpu__time_duration.sum`` for an ncu CSV read alone; -1 none), ``op_stack`` (every enclosing CPU event, outermost first, `` > ``-joined), ``top_op`` /
``bottom_op`` (outermost / innermost framework operator, category ``cpu_op``, as HTA),
the raw counters, then ``derived.DERIVED``. ``kinds``: the per-kind summary with its totals
row (``kinds.kind_summary``).

``ncu_tables(path)`` makes the same tables from an ncu CSV alone (no trace: no events, stacks
or operators; durations from the CSV).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...columns.scan import KERNEL, TraceColumns
from ...errors import UsageError
from ...io.read.ncu_csv import DURATION, read_ncu_csv
from ...util.lazy_pandas import pd
from ..structure.stacks import Stacks, build_stacks
from .derived import DERIVED, Peaks, add_derived, add_efficiency, choose_peaks
from .kinds import kind_summary
from .measurements import ID_COLUMNS, PROBLEM_COLUMNS, Measurements
from .ncu_join import SOURCE, join_ncu
from .ranges import match_ranges

STACK_COLUMNS = ("op_stack", "top_op", "bottom_op")

OPERATOR_CATS = frozenset({"cpu_op", "operator"})
NO_OP = "(no operator)"
NO_COUNTERS = "the trace has no cuda_profiler_range events and no --ncu file was given"
HOW_TO_RECORD = (  # lines
    "to record counters, either:",
    "  torch.profiler.profile(..., experimental_config=torch.profiler._ExperimentalConfig(",
    "      profiler_metrics=[...], profiler_measure_per_kernel=True))  (cuda_profiler_range events)",
    "  or Nsight Compute: ncu --set full -o profile python ...; then",
    "      ncu -i profile.ncu-rep --csv --page raw > profile.csv",
    "      traceforge counters TRACE --ncu profile.csv  (or: traceforge counters profile.csv)",
)
RANGE_PROFILER_CHECK = (  # lines
    "if the run asked torch.profiler for per-kernel metrics (profiler_metrics=[...],",
    "profiler_measure_per_kernel=True), the range profiler did not run: recent PyTorch builds can",
    "return an ordinary kernel trace for that configuration (seen with torch 2.11 on an H100).",
    "Check the run's log for CUPTI/Kineto warnings, that the metric names exist on this GPU, and",
    "that users may read GPU counters (NVreg_RestrictProfilingToAdminUsers=0); or use ncu instead.",
)
NCU_ONLY = "csv only"  # status of an ncu row read without a trace


@dataclass
class CounterTables:
    """``kernels`` (see the module docstring), ``operators`` (sums per top-level operator),
    ``problems`` (every mismatch and unmatched item), ``summary`` lines, ``peaks`` used."""

    kernels: pd.DataFrame
    operators: pd.DataFrame
    problems: pd.DataFrame
    summary: list[str] = field(default_factory=list)
    peaks: Peaks | None = None
    counters: list[str] = field(default_factory=list)
    kinds: pd.DataFrame = field(default_factory=lambda: kind_summary(pd.DataFrame()))


def _stack_columns(cols: TraceColumns, stacks: Stacks, launch_row: np.ndarray) -> tuple[list, list, list]:
    """(op_stack, top_op, bottom_op) per launch row; each CPU op's is built once, from its parent's."""
    cpu = cols.cpu_ops
    is_op = np.array([c.lower() in OPERATOR_CATS for c in cols.cats] or [False], dtype=bool)
    memo: dict[int, tuple[str, str, str]] = {-1: ("", "", "")}

    def stack_of(op: int) -> tuple[str, str, str]:
        chain = []
        while op not in memo:
            chain.append(op)
            op = int(stacks.cpu_parent[op])
        stack, top, bottom = memo[op]
        for row in reversed(chain):
            name = cols.names[int(cpu.name[row])]
            stack = f"{stack} > {name}" if stack else name
            if is_op[cpu.cat[row]]:
                top, bottom = top or name, name
            memo[row] = (stack, top, bottom)
        return memo[chain[0]] if chain else memo[op]

    out = [stack_of(int(stacks.launch_op[row]) if row >= 0 else -1) for row in launch_row.tolist()]
    return [o[0] for o in out], [o[1] for o in out], [o[2] for o in out]


def _event_columns(cols: TraceColumns, rows: pd.DataFrame) -> pd.DataFrame:
    gpu, launches = cols.gpu, cols.launches
    g, l = rows["gpu_row"].to_numpy(), rows["launch_row"].to_numpy()
    has_g, has_l = g >= 0, l >= 0
    gs, ls = np.maximum(g, 0), np.maximum(l, 0)

    def take(column: np.ndarray, idx: np.ndarray, has: np.ndarray) -> np.ndarray:
        return np.where(has, column[idx], -1) if len(column) else np.full(len(idx), -1, np.int64)

    event = np.where(has_g, take(gpu.ordinal, gs, has_g), take(launches.ordinal, ls, has_l))
    return pd.DataFrame({
        "event": event.astype(np.int64),
        "event_kind": np.where(has_g, "kernel", np.where(has_l, "launch", "")),
        "trace_kernel": [cols.names[int(gpu.name[r])] if r >= 0 else "" for r in g.tolist()],
        "kernel_ts_ns": take(gpu.ts, gs, has_g).astype(np.int64),
        "kernel_dur_ns": take(gpu.dur, gs, has_g).astype(np.int64),
        "launch_ts_ns": take(launches.ts, ls, has_l).astype(np.int64),
    }, index=rows.index)


def operator_summary(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per top-level operator: kernels, FLOPs, DRAM and L2 bytes, kernel time, and the rates
    over the kernels that have a trace duration."""
    if kernels.empty:
        return pd.DataFrame(columns=["top_op", "kernels", "flops", "dram_bytes", "l2_bytes", "kernel_time_ns",
                                     "achieved_tflops", "dram_gbps"])
    df = kernels.assign(top_op=kernels["top_op"].replace("", NO_OP))
    timed = df["time_ns"] > 0
    df = df.assign(kernel_time_ns=df["time_ns"].where(timed, 0),
                   timed_flops=df["flops"].where(timed), timed_dram=df["dram_bytes"].where(timed))
    g = df.groupby("top_op", sort=False)
    out = pd.DataFrame({
        "kernels": g.size(),
        "flops": g["flops"].sum(min_count=1),
        "dram_bytes": g["dram_bytes"].sum(min_count=1),
        "l2_bytes": g["l2_bytes"].sum(min_count=1),
        "kernel_time_ns": g["kernel_time_ns"].sum().astype(np.int64),
    })
    time = out["kernel_time_ns"].where(out["kernel_time_ns"] > 0).astype(float)
    out["achieved_tflops"] = g["timed_flops"].sum(min_count=1) / time / 1e3
    out["dram_gbps"] = g["timed_dram"].sum(min_count=1) / time
    return out.reset_index().sort_values(["kernels", "top_op"], ascending=[False, True], ignore_index=True)


def has_counters(cols: TraceColumns, ncu: str | None) -> bool:
    """Whether there is anything to tie to kernels: the trace's CUPTI ranges or an ncu CSV."""
    return bool(len(cols.ranges)) or ncu is not None


def checked_counter_options(*, ncu: str | None = None, ncu_skip: int | None = 0, peak_dram_gbps: float | None = None,
                            peak_tensor_pct: float | None = None) -> dict:
    """``counter_tables``' keyword arguments, checked: the ncu file exists, the skip is not
    negative, the peaks are positive numbers."""
    if ncu is not None and not Path(ncu).is_file():
        raise UsageError(f"ncu CSV {ncu}: no such file")
    skip = ncu_skip or 0
    if skip < 0:
        raise UsageError(f"ncu_skip must be >= 0, not {skip}")
    for name, value in (("peak_dram_gbps", peak_dram_gbps), ("peak_tensor_pct", peak_tensor_pct)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UsageError(f"{name} must be a positive number, not {value}")
    return {"ncu": ncu, "ncu_skip": skip, "peak_dram_gbps": peak_dram_gbps, "peak_tensor_pct": peak_tensor_pct}


def counter_tables(
    cols: TraceColumns,
    *,
    ncu: str | None = None,
    ncu_skip: int = 0,
    peak_dram_gbps: float | None = None,
    peak_tensor_pct: float | None = None,
) -> CounterTables:
    """Counters from the trace's CUPTI ranges and/or an ncu CSV, tied to kernels and operators."""
    if not has_counters(cols, ncu):
        empty = pd.DataFrame(columns=list(ID_COLUMNS))
        return CounterTables(empty, operator_summary(empty), pd.DataFrame(columns=list(PROBLEM_COLUMNS)),
                             no_counters_hints(cols))
    stacks = build_stacks(cols)
    parts: list[Measurements] = []
    if len(cols.ranges):
        parts.append(match_ranges(cols, stacks))
    if ncu is not None:
        parts.append(join_ncu(cols, stacks, read_ncu_csv(ncu), ncu_skip))
    rows = pd.concat([p.rows for p in parts], ignore_index=True)
    events = _event_columns(cols, rows)
    own = {*ID_COLUMNS, *events.columns, *STACK_COLUMNS, "time_ns", *DERIVED}
    # an arg named as one of the table's own columns (a range's "stream" or "source") is no counter
    counters = [c for c in dict.fromkeys(c for p in parts for c in p.counters) if c not in own]
    op_stack, top, bottom = _stack_columns(cols, stacks, rows["launch_row"].to_numpy())
    extra = [c for c in rows.columns if c not in own and c not in counters]
    kernels = pd.concat([rows[list(ID_COLUMNS)], events, pd.DataFrame(
        dict(zip(STACK_COLUMNS, (op_stack, top, bottom))), index=rows.index), rows[extra + counters]], axis=1)
    kernels.insert(kernels.columns.get_loc("launch_ts_ns") + 1, "time_ns", kernels["kernel_dur_ns"])
    peaks = _derived(kernels, cols.metadata, peak_dram_gbps, peak_tensor_pct)
    summary = [line for p in parts for line in p.summary]
    if (kernels["event_kind"] == "launch").any() and not (kernels["kernel_dur_ns"] > 0).any():
        summary.append("counters sit on launch calls (the trace has no kernel events, so no kernel durations): "
                       "TFLOP/s, GB/s and efficiency are left empty")
    problems = pd.concat([p.problems for p in parts], ignore_index=True)
    return CounterTables(kernels, operator_summary(kernels), problems, summary, peaks, counters, kind_summary(kernels))


def _derived(kernels: pd.DataFrame, metadata: dict, peak_dram_gbps: float | None, peak_tensor_pct: float | None
             ) -> Peaks:
    """Add ``DERIVED`` (rates over ``time_ns``) and return the peaks chosen."""
    add_derived(kernels, kernels["time_ns"].where(kernels["time_ns"] > 0))
    peaks = choose_peaks(kernels, metadata, dram_gbps=peak_dram_gbps, tensor_pct=peak_tensor_pct)
    add_efficiency(kernels, peaks)
    return peaks


def no_counters_hints(cols: TraceColumns) -> list[str]:
    """What a trace without counters lacks, what to check, and how to record counters."""
    kernels = int(np.count_nonzero(cols.gpu.kind == KERNEL))
    if not kernels:
        return [NO_COUNTERS, *HOW_TO_RECORD]
    return [NO_COUNTERS, f"(it has {kernels:,} kernel events: an ordinary kernel trace)", *RANGE_PROFILER_CHECK,
            *HOW_TO_RECORD]


def ncu_tables(path: str, *, peak_dram_gbps: float | None = None, peak_tensor_pct: float | None = None
               ) -> CounterTables:
    """The counter tables of an ``ncu --csv --page raw`` file alone: one ``kernels`` row per
    profiled launch (status ``NCU_ONLY``, no trace event, stack or operator), rates over ncu's
    own ``gpu__time_duration.sum`` (exact ns); the peaks as with a trace, less the GPU's spec
    sheet (the CSV does not name the GPU): ``--peak-dram-gbps`` or the best kernel."""
    ncu = read_ncu_csv(path)
    rows, n = ncu.rows, len(ncu.rows)
    none = np.full(n, -1, np.int64)
    kernels = pd.DataFrame({
        "source": SOURCE, "source_index": rows["ncu_id"].to_numpy(), "kernel": rows["kernel"].to_numpy(),
        "status": NCU_ONLY, "device": rows["device"].to_numpy(), "stream": rows["stream"].to_numpy(),
        "gpu_row": none, "launch_row": none, "event": none, "event_kind": "", "trace_kernel": "",
        "kernel_ts_ns": none, "kernel_dur_ns": none, "launch_ts_ns": none, "time_ns": rows["time_ns"].to_numpy(),
        "op_stack": "", "top_op": "", "bottom_op": "",
        "ncu_grid": [str(g) if g else "" for g in rows["grid"]], "ncu_block": [str(b) if b else "" for b in rows["block"]],
    }, index=rows.index)
    kernels = pd.concat([kernels, rows[ncu.metrics]], axis=1)
    peaks = _derived(kernels, {}, peak_dram_gbps, peak_tensor_pct)
    summary = [f"ncu: {n:,} rows of {path}, no trace: durations are ncu's {DURATION} (each kernel replayed "
               "alone, not the program's own run)"]
    if DURATION not in rows:
        summary.append(f"the CSV has no {DURATION} column: no durations, so no rates (export it with --metrics)")
    if peaks.dram_source != "--peak-dram-gbps":
        summary.append("the CSV does not name the GPU: give --peak-dram-gbps (e.g. 3350 for an H100 SXM) "
                       "for its spec-sheet bandwidth")
    empty_ops = operator_summary(kernels.iloc[:0])
    return CounterTables(kernels, empty_ops, pd.DataFrame(columns=list(PROBLEM_COLUMNS)), summary, peaks,
                         list(ncu.metrics), kind_summary(kernels))
