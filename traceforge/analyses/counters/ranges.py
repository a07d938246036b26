"""CUPTI range-profiler events (``cuda_profiler_range``) paired with the launches they measured.

In per-kernel mode (``profiler_measure_per_kernel=True``) CUPTI measures every kernel a
device runs as one range, in launch order, replaying it once per counter pass; Kineto
writes one event per range, named after the kernel (``__missing__`` when CUPTI had no
name for it), on ``pid`` = device, with the counters in ``args``. The events carry no
correlation id, no stream, and **no real time**: Kineto splits the profiling session's
span evenly over the ranges (range i starts at session start + i x span / N, all equal
length, back to back). So every range starts at or near the session start, long before the
kernel it measured was launched (23 ms to 3 s before on the shared A100 trace), and its
``ts``/``dur`` say nothing about the kernel. Order is all there is.

Pairing: per device, the i-th range (by ts, then file order) with the i-th kernel launched
on that device (by launch call time). When the trace has kernel events, each range is
checked against its kernel's name; without them (the usual case: Kineto refuses to record
kernels in this mode) the launch call's ``kernel`` arg is used if it has one, and
otherwise the pairing is reported as unverified. Extra ranges or launches on either side
are reported, never dropped, and the rest of the device still pairs (HTA drops the rank).
"""

from __future__ import annotations

import numpy as np

from ...columns.scan import TraceColumns
from ...util.lazy_pandas import pd
from ..launches.calls import STREAM_LAUNCH_APIS
from ..structure.stacks import Stacks
from .measurements import ID_COLUMNS, Measurements, kernel_launch_order, problems_frame
from .names import UNNAMED, same_kernel

SOURCE = "cupti_range"
KERNEL_LAUNCH_APIS = frozenset(a for a in STREAM_LAUNCH_APIS if "Launch" in a and "Graph" not in a)
GRAPH_LAUNCH_APIS = frozenset(a for a in STREAM_LAUNCH_APIS if "Graph" in a)

VERIFIED, MISMATCH, UNNAMED_RANGE, UNVERIFIED, UNPAIRED = (
    "verified", "name mismatch", "unnamed range", "unverified", "unpaired")


def _api_rows(cols: TraceColumns, apis: frozenset[str]) -> np.ndarray:
    is_api = np.array([n in apis for n in cols.names] or [False], dtype=bool)
    return np.flatnonzero(is_api[cols.launches.name]) if len(cols.launches) else np.zeros(0, np.int64)


def _targets(cols: TraceColumns, stacks: Stacks) -> tuple[pd.DataFrame, str]:
    """What the ranges measured, in launch order: kernels if the trace has them, else launch calls."""
    gpu, launches = cols.gpu, cols.launches
    kern = kernel_launch_order(cols, stacks)
    if len(kern):
        return pd.DataFrame({
            "device": gpu.device[kern], "stream": gpu.stream[kern], "gpu_row": kern,
            "launch_row": stacks.gpu_launch[kern], "name": [cols.names[i] for i in gpu.name[kern].tolist()],
        }), "kernel events"
    rows = _api_rows(cols, KERNEL_LAUNCH_APIS)
    rows = rows[np.lexsort((launches.ordinal[rows], launches.ts[rows]))]
    kernel = launches.kernel[rows]
    return pd.DataFrame({
        "device": np.full(len(rows), -1, np.int64), "stream": np.full(len(rows), -1, np.int64),
        "gpu_row": np.full(len(rows), -1, np.int64), "launch_row": rows,
        "name": [cols.names[k] if k >= 0 else None for k in kernel.tolist()],
    }), "kernel launch calls"


def _range_device(cols: TraceColumns) -> np.ndarray:
    pids = [cols.tracks[t][0] for t in cols.ranges.track.tolist()]
    return np.array([p if type(p) is int else -1 for p in pids], dtype=np.int64)


def _counter_frame(cols: TraceColumns) -> pd.DataFrame:
    """The ranges' numeric args as float columns (non-numeric args are left out)."""
    raw = pd.DataFrame.from_records(cols.range_args, index=range(len(cols.ranges)))
    keep = {}
    for name in raw.columns:
        values = pd.to_numeric(raw[name], errors="coerce")
        if values.notna().any() and name not in ID_COLUMNS:  # a "stream" or "source" arg is no counter
            keep[str(name)] = values.astype(float)
    return pd.DataFrame(keep, index=raw.index)


def _status(range_name: str, target_name: str | None) -> str:
    if range_name in UNNAMED:
        return UNNAMED_RANGE
    if target_name is None:
        return UNVERIFIED
    return VERIFIED if same_kernel(range_name, target_name) else MISMATCH


def match_ranges(cols: TraceColumns, stacks: Stacks) -> Measurements:
    """Pair every ``cuda_profiler_range`` with what it measured; see the module docstring."""
    ranges = cols.ranges
    n = len(ranges)
    counters = _counter_frame(cols)
    range_names = [cols.names[i] for i in ranges.name.tolist()]
    range_device = _range_device(cols)
    targets, what = _targets(cols, stacks)
    problems: list[tuple] = []
    summary: list[str] = []

    pair_target = np.full(n, -1, np.int64)
    devices = sorted(set(range_device.tolist()))
    if what == "kernel launch calls":
        if len(devices) == 1:
            targets["device"] = devices[0]
        elif len(targets):
            problems.append((SOURCE, "launch device unknown", -1, "",
                             f"ranges on devices {devices} but no kernel events say which GPU each launch "
                             "went to: ranges left unpaired"))
        graphs = _api_rows(cols, GRAPH_LAUNCH_APIS)
        if len(graphs):
            problems.append((SOURCE, "graph launches", -1, "",
                             f"{len(graphs)} graph launches: their kernels are measured as ranges but are not "
                             "launch calls, so pairs after the first one may be shifted"))
    t_device = targets["device"].to_numpy()
    for d in devices:
        r = np.flatnonzero(range_device == d)
        r = r[np.lexsort((ranges.ordinal[r], ranges.ts[r]))]
        t = np.flatnonzero(t_device == d)  # already in launch order
        k = min(len(r), len(t))
        pair_target[r[:k]] = t[:k]
        for row in r[k:].tolist():
            problems.append((SOURCE, "range without launch", int(ranges.ordinal[row]), range_names[row],
                             f"range {row} on device {d}: {len(r)} ranges but {len(t)} {what}"))
        for row in t[k:].tolist():
            gpu_row, launch_row = int(targets["gpu_row"].iat[row]), int(targets["launch_row"].iat[row])
            ordinal = int(cols.gpu.ordinal[gpu_row]) if gpu_row >= 0 else (
                int(cols.launches.ordinal[launch_row]) if launch_row >= 0 else -1)
            problems.append((SOURCE, "launch without range", ordinal, targets["name"].iat[row] or "",
                             f"device {d}: {len(t)} {what} but {len(r)} ranges (the profiler's range limit?)"))
        summary.append(f"CUPTI ranges: {len(r):,} on device {d}, paired by order with {k:,} of {len(t):,} {what}")

    paired = pair_target >= 0
    safe = np.maximum(pair_target, 0)
    target_names = targets["name"].to_numpy(dtype=object) if len(targets) else np.full(n, None, dtype=object)
    status = [_status(name, target_names[t]) if ok else UNPAIRED
              for name, t, ok in zip(range_names, safe.tolist(), paired.tolist())]
    for row, st in enumerate(status):
        if st == MISMATCH:
            problems.append((SOURCE, MISMATCH, int(ranges.ordinal[row]), range_names[row],
                             f"range {row} measured {range_names[row]!r} but is paired with {target_names[safe[row]]!r}"))
        elif st == UNNAMED_RANGE:
            problems.append((SOURCE, UNNAMED_RANGE, int(ranges.ordinal[row]), range_names[row],
                             f"range {row} has no kernel name: paired by order only"))

    def pick(column: str, fill: int) -> np.ndarray:
        values = targets[column].to_numpy() if len(targets) else np.zeros(0, np.int64)
        return np.where(paired, values[safe] if len(values) else fill, fill).astype(np.int64)

    rows = pd.DataFrame({
        "source": SOURCE, "source_index": np.arange(n, dtype=np.int64), "kernel": range_names, "status": status,
        "device": range_device, "stream": pick("stream", -1), "gpu_row": pick("gpu_row", -1),
        "launch_row": pick("launch_row", -1),
    }, columns=list(ID_COLUMNS))
    rows = pd.concat([rows, counters], axis=1)
    counts = pd.Series(status).value_counts()
    summary.append("CUPTI range checks: " + ", ".join(f"{v:,} {k}" for k, v in counts.items()) +
                   (" (no kernel names in the trace to check against)" if counts.get(UNVERIFIED) else ""))
    return Measurements(rows, list(counters.columns), problems_frame(problems), summary)
