"""The roofline as tables: per op name + shapes + dtype (sorted by time lost), per family, per
profiler step, and what is not modelled. Times are integer ns; a roofline figure is absent (NA)
where the GPU or its peak for the op's math is unknown.

time lost = actual kernel time - roofline time. A step's time at the roof is its CPU range's
duration less the time its modelled kernels lost: an estimate that holds where the step waits on
its kernels one after another (one busy stream).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...columns.scan import TraceColumns
from ...util.lazy_pandas import pd
from ..structure.steps import gpu_steps, profiler_steps
from .limits import GpuLimits
from .model import BOUNDS, NO_BOUND, Roofline

TABLES = ("ops", "families", "steps", "unmodelled")
NOT_MODELLED = "(not modelled)"


@dataclass
class RooflineTables:
    """``ops``, ``families``, ``steps`` and ``unmodelled`` (see the module docstring); coverage: the
    share of kernel time modelled; ``notes``: what is missing and how to get it."""

    ops: pd.DataFrame
    families: pd.DataFrame
    steps: pd.DataFrame
    unmodelled: pd.DataFrame
    kernel_ns: int
    modelled_ns: int
    notes: list[str] = field(default_factory=list)
    gpus: dict[int, str] = field(default_factory=dict)
    limits: dict[int, GpuLimits] = field(default_factory=dict)  # by device, where known

    @property
    def coverage_pct(self) -> float:
        return 100 * self.modelled_ns / self.kernel_ns if self.kernel_ns else 0.0

    def table(self, name: str) -> pd.DataFrame:
        return getattr(self, name)


def roofline_tables(cols: TraceColumns, r: Roofline) -> RooflineTables:
    """The tables of ``r`` (made from ``cols``)."""
    dur = np.maximum(cols.gpu.dur[r.rows], 0).astype(np.int64)
    return RooflineTables(_ops(r, dur), _families(r, dur), _steps(cols, r, dur), _unmodelled(cols, r),
                          r.kernel_ns, r.modelled_ns, list(r.notes), dict(r.gpus), dict(r.limits))


def _sums(group: np.ndarray, n: int, **columns: np.ndarray) -> dict[str, np.ndarray]:
    out = {}
    for name, values in columns.items():
        total = np.zeros(n, np.int64)
        np.add.at(total, group, values)
        out[name] = total
    return out


def _roof_sums(group: np.ndarray, n: int, roof: np.ndarray) -> pd.array:
    """Roofline ns per group, NA where a kernel of it has none."""
    total = np.zeros(n, np.int64)
    np.add.at(total, group, np.maximum(roof, 0))
    unknown = np.zeros(n, bool)
    unknown[group[roof < 0]] = True
    out = pd.array(total, dtype="Int64")
    out[unknown] = pd.NA
    return out


def _rates(frame: pd.DataFrame) -> pd.DataFrame:
    """Achieved TFLOP/s, GB/s, intensity, % of roofline and time lost from the sums of ``frame``."""
    t = frame["time_ns"].to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        frame["tflops"] = np.where(t > 0, frame["flops"].to_numpy(np.float64) / t / 1e3, np.nan)
        frame["gbps"] = np.where(t > 0, frame["bytes"].to_numpy(np.float64) / t, np.nan)
        b = frame["bytes"].to_numpy(np.float64)
        frame["intensity"] = np.where(b > 0, frame["flops"].to_numpy(np.float64) / b, np.nan)
        roof = frame["roofline_ns"].astype("Float64").to_numpy(np.float64, na_value=np.nan)
        frame["roofline_pct"] = np.where(t > 0, 100 * roof / t, np.nan)
    frame["lost_ns"] = frame["time_ns"].astype("Int64") - frame["roofline_ns"]
    return frame


def _ops(r: Roofline, dur: np.ndarray) -> pd.DataFrame:
    n = len(r.keys)
    sums = _sums(r.key, n, kernels=np.ones(len(r.key), np.int64), time_ns=dur, flops=r.flops, bytes=r.bytes)
    count = np.zeros(n, np.int64)
    if len(r.key):
        pairs = np.unique(np.stack([r.key, r.owner]), axis=1)
        np.add.at(count, pairs[0], 1)
    bound = np.full(n, NO_BOUND, np.int8)
    bound[r.key[::-1]] = r.bound[::-1]  # the first kernel's
    frame = pd.DataFrame({
        "op": [k.name for k in r.keys], "shapes": [k.shapes for k in r.keys], "dtype": [k.dtype for k in r.keys],
        "family": [k.family for k in r.keys], "count": count, **sums,
        "bound": [BOUNDS[b] if b >= 0 else "" for b in bound.tolist()],
        "roofline_ns": _roof_sums(r.key, n, r.roof_ns),
    })
    frame = _rates(frame)
    order = np.lexsort((-frame["time_ns"].to_numpy(), -frame["lost_ns"].fillna(-1).to_numpy(np.int64)))
    return frame.iloc[order].reset_index(drop=True)[_OP_COLUMNS]


_OP_COLUMNS = ["op", "shapes", "dtype", "family", "count", "kernels", "time_ns", "flops", "bytes", "tflops", "gbps",
               "intensity", "bound", "roofline_ns", "roofline_pct", "lost_ns"]
_TOTAL_COLUMNS = ["kernels", "time_ns", "flops", "bytes", "tflops", "gbps", "intensity", "roofline_ns",
                  "roofline_pct", "lost_ns"]


def _families(r: Roofline, dur: np.ndarray) -> pd.DataFrame:
    names = sorted({k.family for k in r.keys})
    of_key = np.array([names.index(k.family) for k in r.keys] + [0], np.int64)
    group = of_key[r.key] if len(r.key) else np.zeros(0, np.int64)
    sums = _sums(group, len(names), kernels=np.ones(len(group), np.int64), time_ns=dur, flops=r.flops, bytes=r.bytes)
    frame = _rates(pd.DataFrame({"family": names, **sums, "roofline_ns": _roof_sums(group, len(names), r.roof_ns)}))
    frame = frame.sort_values("time_ns", ascending=False, kind="stable")
    rest = pd.DataFrame({"family": [NOT_MODELLED], "kernels": [len(r.unmodelled_rows)],
                         "time_ns": [r.kernel_ns - r.modelled_ns]})
    out = pd.concat([frame, rest], ignore_index=True)[["family", *_TOTAL_COLUMNS]]
    return out.astype({c: "Int64" for c in ("kernels", "time_ns", "flops", "bytes", "roofline_ns", "lost_ns")})


def _steps(cols: TraceColumns, r: Roofline, dur: np.ndarray) -> pd.DataFrame:
    steps = profiler_steps(cols)
    columns = ["step", "step_ns", "kernel_ns", "modelled_ns", "roofline_ns", "lost_ns", "step_at_roof_ns"]
    if not len(steps):
        return pd.DataFrame({c: pd.array([], dtype="Int64") for c in columns})
    numbers, first = np.unique(steps.number, return_index=True)
    step_of = gpu_steps(cols, steps)
    index = {s: i for i, s in enumerate(numbers.tolist())}
    lookup = np.vectorize(lambda s: index.get(s, -1), otypes=[np.int64])

    def by_step(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
        at = lookup(step_of[rows]) if len(rows) else np.zeros(0, np.int64)
        keep = at >= 0
        total = np.zeros(len(numbers), np.int64)
        np.add.at(total, at[keep], values[keep])
        return total

    kernels = np.concatenate([r.rows, r.unmodelled_rows])
    kernel_ns = by_step(kernels, np.maximum(cols.gpu.dur[kernels], 0).astype(np.int64))
    modelled = by_step(r.rows, dur)
    known = r.roof_ns >= 0
    roof = by_step(r.rows[known], r.roof_ns[known])
    lost = by_step(r.rows[known], dur[known] - r.roof_ns[known])
    step_ns = (steps.end - steps.start)[first]
    frame = pd.DataFrame({"step": numbers, "step_ns": step_ns, "kernel_ns": kernel_ns, "modelled_ns": modelled,
                          "roofline_ns": roof, "lost_ns": lost, "step_at_roof_ns": step_ns - lost})
    if not known.any():
        for c in ("roofline_ns", "lost_ns", "step_at_roof_ns"):
            frame[c] = pd.array([pd.NA] * len(frame), dtype="Int64")
    return frame[columns]


def _unmodelled(cols: TraceColumns, r: Roofline) -> pd.DataFrame:
    dur = np.maximum(cols.gpu.dur[r.unmodelled_rows], 0).astype(np.int64)
    n = len(r.reasons)
    sums = _sums(r.unmodelled_reason, n, kernels=np.ones(len(dur), np.int64), time_ns=dur)
    frame = pd.DataFrame({"name": [n for n, _ in r.reasons], "why": [w for _, w in r.reasons], **sums})
    frame = frame.groupby(["name", "why"], sort=False, as_index=False)[["kernels", "time_ns"]].sum()
    frame["share_pct"] = 100 * frame["time_ns"] / r.kernel_ns if r.kernel_ns else 0.0
    return frame.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)
