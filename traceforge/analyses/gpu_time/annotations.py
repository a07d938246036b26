"""GPU user annotations: time per ``gpu_user_annotation`` name, per device.

Kineto draws a ``record_function`` range (and DDP's, the optimizer's, NCCL's) on the GPU
stream its kernels ran on: a ``gpu_user_annotation`` event (ph X; pid the device, tid the
stream) from the annotation's first GPU op start to its last GPU op end. Per (device, name):
count, total (summed durations, ns; a negative dur counts as 0), mean, min, max, sample std
(HTA's ``get_gpu_user_annotation_breakdown`` columns, exact ns), and two shares:

- ``pct_of_annotated``: of the device's summed annotation time (the shares of a device add
  up to 100 %, as HTA's pie chart of the sums);
- ``pct_of_span``: of the device's GPU span (its first GPU op start to its last GPU op end;
  the annotations' own span where the device has no GPU op): how much of the profiled GPU
  time the annotation covered, counted once per instance (nested or repeated instances that
  overlap count each time).

Every step is included (HTA drops the last one).
"""

from __future__ import annotations

import numpy as np

from ...columns.names import names_at
from ...columns.scan import TraceColumns
from ...util.distinct import unique
from ...util.lazy_pandas import pd

COLUMNS = ["device", "name", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "std_ns", "pct_of_annotated",
           "pct_of_span"]
_DTYPES = {"name": object, "mean_ns": np.float64, "std_ns": np.float64, "pct_of_annotated": np.float64,
           "pct_of_span": np.float64}  # the rest int64


def gpu_annotation_times(cols: TraceColumns) -> pd.DataFrame:
    """Per (device, annotation name), by device then total time (largest first), then name."""
    a = cols.gpu_annotations
    if not len(a):
        return pd.DataFrame({c: np.zeros(0, _DTYPES.get(c, np.int64)) for c in COLUMNS})  # typed: ranks concatenate
    df = pd.DataFrame({"device": a.device.astype(np.int64), "name": a.name, "dur": np.maximum(a.dur, 0).astype(np.int64)})
    g = df.groupby(["device", "name"], sort=False)["dur"]
    out = pd.DataFrame({"count": g.size(), "total_ns": g.sum(), "min_ns": g.min(), "max_ns": g.max(),
                        "std_ns": g.std().fillna(0.0)}).reset_index()
    out.insert(4, "mean_ns", out["total_ns"] / out["count"])
    annotated = out.groupby("device")["total_ns"].transform("sum")
    out["pct_of_annotated"] = 100.0 * out["total_ns"] / annotated.where(annotated > 0)
    span = out["device"].map(_device_spans(cols))
    out["pct_of_span"] = 100.0 * out["total_ns"] / span.where(span > 0)
    out[["pct_of_annotated", "pct_of_span"]] = out[["pct_of_annotated", "pct_of_span"]].fillna(0.0)
    out["name"] = names_at(cols.names, out["name"].to_numpy())
    out = out.sort_values(["device", "total_ns", "name"], ascending=[True, False, True], kind="stable")
    return out[COLUMNS].reset_index(drop=True)


def _device_spans(cols: TraceColumns) -> dict[int, int]:
    """Per device with annotations: its GPU span in ns (see the module docstring)."""
    a, gpu = cols.gpu_annotations, cols.gpu
    spans = {}
    for d in unique(a.device).tolist():
        mine = gpu.device == d
        table = gpu if mine.any() else a
        rows = np.flatnonzero(mine) if mine.any() else np.flatnonzero(a.device == d)
        ts = table.ts[rows].astype(np.int64)
        spans[int(d)] = int((ts + np.maximum(table.dur[rows], 0)).max() - ts.min())
    return spans
