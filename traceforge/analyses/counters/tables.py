"""The counters report: per-kernel rows with operator stacks and derived metrics, per-operator sums.

``kernels`` columns: ``source`` (``cupti_range`` or ``ncu``), ``source_index`` (range
number or ncu ID), ``kernel`` (name as the source wrote it), ``status`` (how the pairing
was checked), ``device``, ``stream``, ``event`` (ordinal of the trace event that gets the
args: the kernel, else the launch call; -1 none), ``event_kind``, ``trace_kernel`` (the
trace's name for that kernel, "" without kernel events), ``kernel_ts_ns`` /
``kernel_dur_ns`` (the trace's kernel; -1 when the trace has none), ``launch_ts_ns``,
``op_stack`` (every enclosing CPU event, outermost first, `` > ``-joined), ``top_op`` /
``bottom_op`` (outermost / innermost framework operator, category ``cpu_op``, as HTA),
the raw counters, then ``derived.DERIVED``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...columns.scan import TraceColumns
from ...errors import UsageError
from ...util.lazy_pandas import pd
from ..stacks import Stacks, build_stacks
from .derived import Peaks, add_derived, add_efficiency, choose_peaks
from .measurements import ID_COLUMNS, PROBLEM_COLUMNS, Measurements
from .ncu_csv import read_ncu_csv
from .ncu_join import join_ncu
from .ranges import match_ranges

OPERATOR_CATS = frozenset({"cpu_op", "operator"})
NO_OP = "(no operator)"
NO_COUNTERS = "the trace has no cuda_profiler_range events and no --ncu file was given"


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
    timed = df["kernel_dur_ns"] > 0
    df = df.assign(kernel_time_ns=df["kernel_dur_ns"].where(timed, 0),
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
                             [NO_COUNTERS])
    stacks = build_stacks(cols)
    parts: list[Measurements] = []
    if len(cols.ranges):
        parts.append(match_ranges(cols, stacks))
    if ncu is not None:
        parts.append(join_ncu(cols, stacks, read_ncu_csv(ncu), ncu_skip))
    rows = pd.concat([p.rows for p in parts], ignore_index=True)
    counters = list(dict.fromkeys(c for p in parts for c in p.counters))
    events = _event_columns(cols, rows)
    op_stack, top, bottom = _stack_columns(cols, stacks, rows["launch_row"].to_numpy())
    extra = [c for c in rows.columns if c not in ID_COLUMNS and c not in counters]
    kernels = pd.concat([rows[list(ID_COLUMNS)], events, pd.DataFrame(
        {"op_stack": op_stack, "top_op": top, "bottom_op": bottom}, index=rows.index), rows[extra + counters]], axis=1)
    dur = kernels["kernel_dur_ns"].where(kernels["kernel_dur_ns"] > 0)
    add_derived(kernels, dur)
    peaks = choose_peaks(kernels, cols.metadata, dram_gbps=peak_dram_gbps, tensor_pct=peak_tensor_pct)
    add_efficiency(kernels, peaks)
    summary = [line for p in parts for line in p.summary]
    if (kernels["event_kind"] == "launch").any() and not (kernels["kernel_dur_ns"] > 0).any():
        summary.append("counters sit on launch calls (the trace has no kernel events, so no kernel durations): "
                       "TFLOP/s, GB/s and efficiency are left empty")
    problems = pd.concat([p.problems for p in parts], ignore_index=True)
    return CounterTables(kernels, operator_summary(kernels), problems, summary, peaks, counters)
