"""Launch delay: how long each GPU op waited on its stream after its launch call returned.

HTA's definition, so numbers compare: per GPU op joined to its launch call on
``correlation``, ``launch_delay = GPU op start - (launch call start + its duration)``,
with ``cpu_duration`` the launch call's and ``gpu_duration`` the op's duration. All are
exact integer ns. HTA clips the delay at 0; we keep a negative delay (the CPU and GPU
clocks overlap) and flag it, so a clock problem is seen rather than hidden.

A delay has two parts: ``queue_wait``, the part spent behind earlier GPU ops still running on
the op's stream (up to when the last of them that started before it ends), and
``launch_overhead``, the rest (from the launch call's return, or the stream becoming free,
to the op's start). A delay of milliseconds with a small overhead is a full launch queue: the
CPU runs ahead of the GPU, which is not slow launching.
"""

from __future__ import annotations

import numpy as np

from ...columns.names import names_at
from ...columns.scan import GPU_KIND_NAMES, TraceColumns
from ...columns.table import Table
from ...util.lazy_pandas import pd
from ..structure.stacks import nest_calls
from .calls import join_gpu_to_launch, joinable_rows, stream_launch_rows

# HTA's get_cuda_kernel_launch_stats set, 0.5.0 and 0.6.1 alike: these names exactly (no driver
# API, cooperative or graph launches, HIP, or suffixed names).
HTA_LAUNCH_STATS_APIS = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"})
DEFAULT_RUNTIME_CUTOFF_NS = 50_000  # HTA's outlier cutoffs: launch calls above 50 µs,
DEFAULT_DELAY_CUTOFF_NS = 100_000  # launch delays above 100 µs
FIGURES = ("cpu_duration", "gpu_duration", "launch_delay", "queue_wait", "launch_overhead")
PERCENTILES = (50, 90, 99)
TABLE_COLUMNS = (
    "device", "stream", "kind", "name", "gpu_ts", "gpu_duration", "api", "launch_ts", "cpu_duration",
    "launch_delay", "queue_wait", "launch_overhead", "negative_delay", "correlation", "cpu_op", "gpu_ordinal", "launch_ordinal",
)


def launch_pairs(
    cols: TraceColumns, *, apis: frozenset[str] | None = None, launched_before_ns: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gpu rows, launch rows, launch delay ns) of every GPU op joined to a launch call (of ``apis``, HTA's sets,
    if given: see ``launches.stream_launch_mask``).

    ``launched_before_ns`` keeps launches that start before it (HTA drops the last
    profiler step this way; see ``launches.last_step_start``).
    """
    rows = joinable_rows(cols, apis)
    if launched_before_ns is not None:
        rows = rows[cols.launches.ts[rows] < launched_before_ns]
    gpu_rows, launch_rows = join_gpu_to_launch(cols, rows)
    delay = cols.gpu.ts[gpu_rows]
    delay -= cols.launches.ts[launch_rows]  # in place: one temporary per op at a time
    delay -= cols.launches.dur[launch_rows]
    return gpu_rows, launch_rows, delay


def launch_ops(cols: TraceColumns) -> np.ndarray:
    """Per launch call row: the name id of the innermost CPU op around it (-1 when none)."""
    op = nest_calls(cols)[1]
    names = np.full(len(op), -1, np.int32)
    has = op >= 0
    names[has] = cols.cpu_ops.name[op[has]]
    return names


def launch_table(
    cols: TraceColumns, *, apis: frozenset[str] | None = None, launched_before_ns: int | None = None,
    op_names: np.ndarray | None = None, consume: bool = False,
) -> pd.DataFrame:
    """One row per launched GPU op, in trace order (times in ns; see ``TABLE_COLUMNS``).

    ``cpu_op`` is the innermost CPU op around the launch call ("" when none encloses it):
    ``op_names`` is ``launch_ops(cols)`` if the caller took it (and let the CPU ops go).
    With ``consume``, each column of ``cols`` the table reads leaves it once read, so the
    trace's columns and the table are not held whole at once. An empty table carries the
    reason in ``df.attrs["message"]``.
    """
    op_names = launch_ops(cols) if op_names is None else op_names  # first: the stacks go before the pairs come
    gpu_rows, launch_rows, delay = launch_pairs(cols, apis=apis, launched_before_ns=launched_before_ns)
    message = None if len(gpu_rows) else no_launches_reason(cols)
    gpu, launches = cols.gpu, cols.launches
    wait = queue_wait(cols, gpu_rows, launch_rows, delay)
    cpu_op_names = op_names[launch_rows]
    del op_names

    def take(table: Table, column: str, rows: np.ndarray) -> np.ndarray:
        return (table.cols.pop(column) if consume else table.cols[column])[rows]

    df = pd.DataFrame({
        "device": take(gpu, "device", gpu_rows),
        "stream": take(gpu, "stream", gpu_rows),
        "kind": np.array(GPU_KIND_NAMES, dtype=object)[take(gpu, "kind", gpu_rows)],
        "name": names_at(cols.names, take(gpu, "name", gpu_rows)),
        "gpu_ts": take(gpu, "ts", gpu_rows),
        "gpu_duration": take(gpu, "dur", gpu_rows),
        "api": names_at(cols.names, take(launches, "name", launch_rows)),
        "launch_ts": take(launches, "ts", launch_rows),
        "cpu_duration": take(launches, "dur", launch_rows),
        "launch_delay": delay,
        "queue_wait": wait,
        "launch_overhead": delay - wait,
        "negative_delay": delay < 0,
        "correlation": take(gpu, "correlation", gpu_rows),
        "cpu_op": names_at(cols.names, cpu_op_names),
        "gpu_ordinal": take(gpu, "ordinal", gpu_rows),
        "launch_ordinal": take(launches, "ordinal", launch_rows),
    }, columns=list(TABLE_COLUMNS), copy=False)  # fresh arrays: no second copy of a big table
    if message is not None:
        df.attrs["message"] = message
    return df


def queue_wait(cols: TraceColumns, gpu_rows: np.ndarray, launch_rows: np.ndarray, delay: np.ndarray) -> np.ndarray:
    """Per launched op (``launch_pairs``' rows): the part of its delay spent behind the GPU ops
    that started before it on its stream, i.e. from its launch call's return until the latest
    end of those (clipped to [0, delay]); exact ns."""
    gpu = cols.gpu
    busy_until = np.full(len(gpu), np.iinfo(np.int64).min, np.int64)
    order = np.lexsort((gpu.ordinal, gpu.ts, gpu.stream, gpu.device))
    device, stream = gpu.device[order], gpu.stream[order]
    cuts = np.flatnonzero((device[1:] != device[:-1]) | (stream[1:] != stream[:-1])) + 1
    ends = gpu.ts[order].astype(np.int64) + np.maximum(gpu.dur[order], 0)
    for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(order)].tolist()):
        if hi - lo > 1:
            busy_until[order[lo + 1:hi]] = np.maximum.accumulate(ends[lo:hi - 1])
    ready = cols.launches.ts[launch_rows].astype(np.int64) + cols.launches.dur[launch_rows]
    until = busy_until[gpu_rows]
    behind = until > ready  # (the first op of a stream has nothing before it: no subtraction from the minimum)
    return np.where(behind, np.clip(np.where(behind, until, ready) - ready, 0, np.maximum(delay, 0)), 0)


def launch_table_consuming(cols: TraceColumns, **options) -> pd.DataFrame:
    """``launch_table(cols, **options)`` for a caller done with ``cols``: the CPU ops go once
    the launch calls' op names are taken, and each GPU op and launch column once the table
    has read it."""
    op_names = launch_ops(cols)
    cols.cpu_ops = cols.cpu_ops.take(np.zeros(0, np.int64))
    return launch_table(cols, op_names=op_names, consume=True, **options)


def no_launches_reason(cols: TraceColumns) -> str:
    """Why a trace has no launch delays, in words a user can act on."""
    kinds = ", ".join(f"{int(np.sum(cols.gpu.kind == k)):,} {n}" for k, n in enumerate(GPU_KIND_NAMES)) \
        if len(cols.gpu) else "no kernel, memcpy or memset events"
    launched = len(stream_launch_rows(cols))
    hint = " (a CUPTI range-profiler trace records no kernels)" if not len(cols.gpu) and len(cols.ranges) else ""
    return (f"{cols.path}: no GPU op joins a launch call on correlation: the trace has {kinds}{hint} "
            f"and {launched:,} stream launch calls")


def _summary(values: np.ndarray) -> dict[str, int]:
    """count, mean, min, nearest-rank percentiles and max, all integer ns (an observed value
    for each percentile; the mean rounded half up)."""
    s = np.sort(values)
    n = len(s)
    out = {"count": n, "mean": int((2 * int(s.sum()) + n) // (2 * n)), "min": int(s[0])}
    for p in PERCENTILES:
        out[f"p{p}"] = int(s[max(0, -(-p * n // 100) - 1)])
    out["max"] = int(s[-1])
    return out


def launch_statistics(table: pd.DataFrame) -> pd.DataFrame:
    """Per figure, over all launches, per (device, stream) and per launch API: count, mean,
    min, p50, p90, p99, max in ns. ``by`` says the grouping, ``key`` the group.

    Groups are row positions into the figure columns: no group's frame is copied.
    """
    values = {figure: table[figure].to_numpy() for figure in FIGURES}
    groups: list[tuple[str, str, np.ndarray | slice]] = [("all", "all", slice(None))] if len(table) else []
    for by, columns, label in (("stream", ["device", "stream"], lambda k: f"GPU {k[0]} stream {k[1]}"),
                               ("api", "api", str)):
        positions = table.groupby(columns, sort=True).indices if len(table) else {}
        groups += [(by, label(key), positions[key]) for key in sorted(positions)]
    records = [{"by": by, "key": key, "figure": figure, **_summary(values[figure][rows])}
               for by, key, rows in groups for figure in FIGURES]
    return pd.DataFrame.from_records(records, columns=[
        "by", "key", "figure", "count", "mean", "min", *(f"p{p}" for p in PERCENTILES), "max"])


def outliers(table: pd.DataFrame, runtime_cutoff_ns: int, delay_cutoff_ns: int) -> dict[str, np.ndarray]:
    """HTA's three outlier lists as row positions into ``table``, worst first (stable): rows,
    not frames, because on a big trace a list can hold half the table.

    ``short_gpu``: the GPU op ran shorter than its (not slow) launch call took, so the CPU
    cannot keep the GPU busy; ``slow_launch``: launch calls longer than the runtime cutoff;
    ``long_delay``: launch delays above the delay cutoff.
    """
    cpu, gpu, delay = (table[c].to_numpy() for c in ("cpu_duration", "gpu_duration", "launch_delay"))
    return {
        "short_gpu": _worst_first(np.flatnonzero((cpu <= runtime_cutoff_ns) & (gpu < cpu)), cpu - gpu),
        "slow_launch": _worst_first(np.flatnonzero(cpu > runtime_cutoff_ns), cpu),
        "long_delay": _worst_first(np.flatnonzero(delay > delay_cutoff_ns), delay),
    }


def _worst_first(rows: np.ndarray, badness: np.ndarray) -> np.ndarray:
    """``rows`` by ``badness`` (int64) descending; equal ones in table order."""
    return rows[np.argsort(-badness[rows], kind="stable")]
